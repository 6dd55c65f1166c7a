package engine

import (
	"fmt"
	"math"
)

// Level is an isolation level. Process isolation is the floor: there is no level below it.
type Level string

const (
	// LevelProcess: a separate process with limits, a scrubbed environment and a killable tree,
	// but no kernel boundary around the filesystem or network.
	LevelProcess Level = "process"
	// LevelIsolated: a kernel boundary (namespaces or a container).
	LevelIsolated Level = "isolated"
)

// ParseLevel returns the level named s.
func ParseLevel(s string) (Level, error) {
	switch Level(s) {
	case LevelProcess, LevelIsolated:
		return Level(s), nil
	case "":
		return LevelProcess, nil
	}
	return "", fmt.Errorf("unknown isolation level %q (want process or isolated)", s)
}

// AtLeast reports whether l reaches min.
func (l Level) AtLeast(min Level) bool { return l.rank() >= min.rank() }

func (l Level) rank() int {
	switch l {
	case LevelIsolated:
		return 2
	case LevelProcess:
		return 1
	}
	return 0
}

// Network is what an execution may reach.
type Network string

const (
	NetworkNone         Network = "none"
	NetworkUnrestricted Network = "unrestricted"
	// NetworkRules: the program's one route out is the host's egress proxy, which allows
	// and refuses by the profile's network rules (docs/design.md §18).
	NetworkRules Network = "rules"
)

// Limits are the hard limits of one execution. A zero field means "no limit at this layer"
// when narrowing, and is never what an execution runs with: Terms always carry all five.
type Limits struct {
	CPUSeconds    float64 `json:"cpu_seconds"`
	WallSeconds   float64 `json:"wall_seconds"`
	MemoryBytes   int64   `json:"memory_bytes"`
	FileSizeBytes int64   `json:"file_size_bytes"`
	ProcessCount  int     `json:"process_count"`
}

// DefaultLimits are the limits of a profile that states none (docs/design.md §3.2).
var DefaultLimits = Limits{CPUSeconds: 10, WallSeconds: 30, MemoryBytes: 512 << 20, FileSizeBytes: 10 << 20, ProcessCount: 64}

// Narrow returns l with every dimension that other sets, and that is tighter, taken from
// other. It can only narrow: a wider request is ignored.
func (l Limits) Narrow(other Limits) Limits {
	l.CPUSeconds = minPositive(l.CPUSeconds, other.CPUSeconds)
	l.WallSeconds = minPositive(l.WallSeconds, other.WallSeconds)
	l.MemoryBytes = int64(minPositive(float64(l.MemoryBytes), float64(other.MemoryBytes)))
	l.FileSizeBytes = int64(minPositive(float64(l.FileSizeBytes), float64(other.FileSizeBytes)))
	l.ProcessCount = int(minPositive(float64(l.ProcessCount), float64(other.ProcessCount)))
	return l
}

func minPositive(a, b float64) float64 {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return math.Min(a, b)
}

// Validate reports a limit that is missing or out of range.
func (l Limits) Validate() error {
	switch {
	case !(l.CPUSeconds > 0):
		return fmt.Errorf("cpu_seconds must be positive, got %v", l.CPUSeconds)
	case !(l.WallSeconds > 0):
		return fmt.Errorf("wall_seconds must be positive, got %v", l.WallSeconds)
	case l.MemoryBytes < 16<<20:
		return fmt.Errorf("memory_bytes must be at least 16MiB (an interpreter needs that much), got %d", l.MemoryBytes)
	case l.FileSizeBytes <= 0:
		return fmt.Errorf("file_size_bytes must be positive, got %d", l.FileSizeBytes)
	case l.ProcessCount < 1:
		return fmt.Errorf("process_count must be at least 1, got %d", l.ProcessCount)
	}
	return nil
}

// Terms are what one execution runs under, after every narrowing: the backend's ceiling, the
// tenant policy, the agent's request and the profile's hard limits (docs/design.md §4).
type Terms struct {
	Limits
	Network   Network `json:"network"`
	Isolation Level   `json:"isolation"`
}

// LimitName names a hard limit in limit_hit.
type LimitName string

const (
	LimitCPU          LimitName = "cpu_seconds"
	LimitWall         LimitName = "wall_seconds"
	LimitMemory       LimitName = "memory_bytes"
	LimitFileSize     LimitName = "file_size_bytes"
	LimitProcessCount LimitName = "process_count"
)

// Known reports whether n is one of the limit names above (a remote service's outcome may
// name no other).
func (n LimitName) Known() bool {
	switch n {
	case LimitCPU, LimitWall, LimitMemory, LimitFileSize, LimitProcessCount:
		return true
	}
	return false
}
