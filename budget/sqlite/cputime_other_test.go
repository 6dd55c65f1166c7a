//go:build !unix

package sqlite

import (
	"testing"
	"time"
)

// processCPU is not read here: the benchmarks' CPU figures are measured on Unix hosts.
func processCPU(*testing.B) time.Duration { return 0 }
