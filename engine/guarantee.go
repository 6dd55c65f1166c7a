package engine

// Dimension is one thing an isolation backend may or may not guarantee.
type Dimension string

// The ten guarantee dimensions, in the order results list them.
const (
	DimFilesystem   Dimension = "filesystem"
	DimNetwork      Dimension = "network"
	DimProcessTree  Dimension = "process_tree"
	DimIdentity     Dimension = "identity"
	DimCPU          Dimension = "cpu"
	DimMemory       Dimension = "memory"
	DimFileSize     Dimension = "file_size"
	DimProcessCount Dimension = "process_count"
	DimWallClock    Dimension = "wall_clock"
	DimEnvironment  Dimension = "environment"
)

// Dimensions lists every dimension in result order.
var Dimensions = []Dimension{DimFilesystem, DimNetwork, DimProcessTree, DimIdentity, DimCPU,
	DimMemory, DimFileSize, DimProcessCount, DimWallClock, DimEnvironment}

// Grade is how strongly a guarantee held.
type Grade string

const (
	// Enforced: observed to hold.
	Enforced Grade = "enforced"
	// Unverified: requested, and nothing contradicted it.
	Unverified Grade = "unverified"
	// Unavailable: this platform does not offer it; said, not implied.
	Unavailable Grade = "unavailable"
)

func (g Grade) rank() int {
	switch g {
	case Enforced:
		return 2
	case Unverified:
		return 1
	}
	return 0
}

// AtLeast reports whether g is as strong as min.
func (g Grade) AtLeast(min Grade) bool { return g.rank() >= min.rank() }

// Guarantees grades every dimension. A missing dimension reads as Unavailable.
type Guarantees map[Dimension]Grade

// Get returns the grade of d, Unavailable when absent.
func (g Guarantees) Get(d Dimension) Grade {
	if v, ok := g[d]; ok {
		return v
	}
	return Unavailable
}

// Requirement is the least grade a dimension must reach for an execution to start.
type Requirement struct {
	Dimension Dimension
	Least     Grade
	Why       string
}

// Requirements lists what terms demand of a backend before any program byte may run.
// sameUIDAccepted relaxes identity: a deployment said, on purpose, that the child may run as
// the host's own user (allow_same_uid), or a kernel boundary surrounds the child (a user,
// mount, pid and network namespace of its own), behind which the default accepts it.
func Requirements(t Terms, sameUIDAccepted bool) []Requirement {
	reqs := []Requirement{
		{DimCPU, Enforced, "cpu_seconds must bind the child"},
		{DimMemory, Enforced, "memory_bytes must bind the child"},
		{DimFileSize, Enforced, "file_size_bytes must bind the child"},
		{DimWallClock, Enforced, "the wall clock always applies"},
		{DimEnvironment, Enforced, "the child's environment must be built from nothing"},
	}
	if !sameUIDAccepted {
		reqs = append(reqs, Requirement{DimIdentity, Enforced,
			"the child must run as a sandbox identity of its own, not the host's, unless a kernel boundary " +
				"(a user, mount, pid and network namespace of its own) surrounds it (set allow_same_uid to accept it anyway)"})
	}
	if t.Isolation.AtLeast(LevelIsolated) {
		reqs = append(reqs,
			Requirement{DimFilesystem, Enforced, "the isolated level needs a mount boundary"},
			Requirement{DimProcessTree, Enforced, "the isolated level needs a tree that dies with the execution"},
			Requirement{DimProcessCount, Enforced, "the isolated level needs a process count that binds"},
		)
		if t.Network == NetworkNone {
			reqs = append(reqs, Requirement{DimNetwork, Enforced, "the isolated level with network none needs a network boundary"})
		}
	}
	if t.Network == NetworkRules {
		reqs = append(reqs, Requirement{DimNetwork, Enforced, "network rules need a network boundary: the egress proxy must be the only route out"})
	}
	return reqs
}

// Unmet returns the requirements g does not meet.
func Unmet(g Guarantees, reqs []Requirement) []Requirement {
	var out []Requirement
	for _, r := range reqs {
		if !g.Get(r.Dimension).AtLeast(r.Least) {
			out = append(out, r)
		}
	}
	return out
}
