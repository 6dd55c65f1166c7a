//go:build linux

package owner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

func TestDeadName(t *testing.T) {
	me := self()
	if !me.procOK {
		gate.Require(t, "proc", false, "no /proc of this pid namespace here")
	}
	// A process that has exited, for a pid nobody holds now.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	gone := cmd.Process.Pid
	otherBoot := "00000000"
	if me.boot == otherBoot {
		otherBoot = "11111111"
	}
	for _, c := range []struct {
		name string
		dead bool
	}{
		{Name("x"), false}, // this process
		{fmt.Sprintf("x-%d.1.%s.%s-ab", os.Getpid(), me.pidns, me.boot), true},   // this pid, another start: reused
		{fmt.Sprintf("x-%d.5.%s.%s-ab", gone, me.pidns, me.boot), true},          // no such process
		{fmt.Sprintf("x-%d.5.1.%s-ab", gone, me.boot), false},                    // another pid namespace
		{fmt.Sprintf("x-%d.5.%s.%s-ab", os.Getpid(), me.pidns, otherBoot), true}, // another boot
		{"x-0123456789abcdef", false},                                            // no tag
		{fmt.Sprintf("x-%d.5.%s.%s", gone, me.pidns, me.boot), false},            // no suffix
	} {
		if got := DeadName(c.name); got != c.dead {
			t.Errorf("DeadName(%q) = %v, want %v", c.name, got, c.dead)
		}
	}
	dir := t.TempDir()
	for _, n := range []string{fmt.Sprintf("w-%d.5.%s.%s-ab", gone, me.pidns, me.boot), Name("w"), "w-0123", "v-" + strings.Repeat("0", 4)} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if n := Sweep(dir, "w", os.Remove); n != 1 {
		t.Errorf("swept %d, want the one dead owner's", n)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 3 {
		t.Errorf("left %v", left)
	}
}
