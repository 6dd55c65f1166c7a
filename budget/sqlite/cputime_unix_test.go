//go:build unix

package sqlite

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU this process has used, user and system (getrusage), which other load
// on the machine does not blur.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
