//go:build linux

package cgroup

import (
	"fmt"
	"os"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// BenchmarkNewRemove makes an execution's group and removes it empty, as a child's teardown
// does once its pid namespace is gone: the cost the host pays per execution for the group
// alone (mkdir and limits in each hierarchy, the kill's list, rmdir), and with Keep (the
// namespaces backend's), where the emptied group is handed to the next New.
func BenchmarkNewRemove(b *testing.B) {
	for _, keep := range []int{0, 1} {
		b.Run(fmt.Sprintf("keep=%d", keep), func(b *testing.B) {
			m, err := Detect(Base)
			gate.Require(b, "cgroup", err == nil, fmt.Sprintf("no usable cgroup hierarchy: %v", err))
			m.Keep(keep)
			defer m.Close()
			id := fmt.Sprintf("bench-%d", os.Getpid())
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				g, err := m.New(fmt.Sprintf("%s-%d", id, i), 64<<20, 64)
				if err != nil {
					b.Fatal(err)
				}
				if err := g.Remove(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
