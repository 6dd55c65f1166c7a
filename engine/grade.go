package engine

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
)

// Grading turns what the child observed (its probe) and what the backend built (its facts)
// into the ten grades. The rules are the spec's:
//
//   - filesystem: a readable canary proves exposure (unavailable); an unreadable or absent one
//     under a mount boundary is enforced; unreadable without a boundary (Landlock, file
//     permissions) proves only that one file was out of reach (unverified).
//   - network: reaching a host loopback listener, or a non-loopback route with sockets
//     allowed, is unavailable; inside a network namespace with only loopback, enforced;
//     otherwise (inet sockets refused by seccomp included: the host's unix sockets remain)
//     unverified.
//   - identity: the child's uid is the sandbox identity and not the host's: enforced.
//     Otherwise unavailable, even behind a kernel boundary: the child runs as the host's
//     own uid, and the result says so. Whether that is accepted is a Requirement.
//   - cpu, memory, file_size: the child saw the rlimit in force (or a cgroup binds memory);
//     for cpu, soft at cpu_seconds and hard at most CPUGraceSeconds above it. An engine's
//     cgroup this host cannot read (Facts.EngineCgroup) binds memory where the child saw its
//     limit there, at most memory_bytes.
//   - process_count: a pids cgroup enforces it (an engine's, where the child saw its limit
//     there at most process_count), and so does RLIMIT_NPROC in a user namespace
//     of the child's own (the kernel counts it per namespace and uid there); elsewhere
//     RLIMIT_NPROC binds a uid, so it follows the identity grade, and means nothing for root.
//   - process_tree: unavailable when the backend cannot kill the program's processes at all
//     (Facts.Unkillable: a root host without CAP_KILL); otherwise a cgroup or a pid namespace enforces it, and so does a subreaper of the
//     backend's own that the program cannot kill (another uid, or a Landlock signal scope);
//     a subreaper the program could kill is unverified (and a result whose subreaper did
//     not report the tree dead carries a failure); an exclusive uid kill is unverified; a
//     process group alone is unavailable (setsid escapes it).
//   - wall_clock: the host's timer, always enforced.
//   - environment: enforced when the child saw only the variables it was meant to.
//
// The kernel's attack surface (new user namespaces, netlink to kernel subsystems, io_uring,
// BPF, keyrings) is no dimension: the one seccomp policy (internal/launch) refuses it on every
// backend whose Mechanisms list seccomp-policy, the container's naming the profile it passes
// the runtime in place of the runtime's default. A backend that lacks it (switched off) says so
// by that absence, never by a grade that would claim it.
type grading struct {
	guarantees    Guarantees
	isolation     Level
	networkDenied bool
	// boundary: the child has a user, mount, pid and network namespace of its own, and the
	// filesystem, network and process tree grades held: a kernel boundary stands between
	// it and everything the host's uid owns. Behind it the default accepts the host's own
	// uid (Requirements).
	boundary bool
	// noMemoryCap: Facts.NoMemoryCap; the process level does not require memory.
	noMemoryCap bool
	// lacking: Facts.Lacking; the process level does not require these.
	lacking []Dimension
}

// allowedEnv is the environment every backend sets itself, besides env_allowlist.
var allowedEnv = []string{"HOME", "TMPDIR", "PATH", "PYTHONDONTWRITEBYTECODE", "LC_CTYPE"}

func grade(p wire.Probe, f Facts, t Terms, envAllowlist []string) grading {
	g := Guarantees{DimWallClock: Enforced}

	switch {
	case p.Canary == "readable":
		g[DimFilesystem] = Unavailable
	case f.MountBoundary:
		g[DimFilesystem] = Enforced
	default:
		g[DimFilesystem] = Unverified
	}

	switch {
	case p.ReachedV4 || p.ReachedV6:
		g[DimNetwork] = Unavailable
	case f.NetNamespace && p.Routes != "some":
		g[DimNetwork] = Enforced
	case !p.InetSocket && !p.Inet6Socket:
		// The kernel refused inet sockets; but without a network namespace the host's unix
		// sockets are still there to be reached, so this is not proof.
		g[DimNetwork] = Unverified
	case p.Routes == "some":
		g[DimNetwork] = Unavailable
	default:
		g[DimNetwork] = Unverified
	}

	if p.UID != f.HostUID && p.UID == f.RunAsUID && p.UID != 0 {
		g[DimIdentity] = Enforced
	} else {
		g[DimIdentity] = Unavailable
	}

	rlimit := func(name string, soft, hard int64) Grade {
		v, ok := p.Rlimits[name]
		if ok && v[0] >= 0 && v[0] <= soft && v[1] >= 0 && v[1] <= hard {
			return Enforced
		}
		return Unavailable
	}
	rl := func(name string, want int64) Grade { return rlimit(name, want, want) }
	g[DimCPU] = rlimit("cpu", int64(CPURlimit(t.CPUSeconds)), int64(CPUHardRlimit(t.CPUSeconds)))
	g[DimMemory] = rl("as", t.MemoryBytes)
	seen := func(v, want int64) bool { return v > 0 && v <= want }
	if f.Cgroup || f.EngineCgroup && seen(p.CgroupMemory, t.MemoryBytes) {
		g[DimMemory] = Enforced
	}
	g[DimFileSize] = rl("fsize", t.FileSizeBytes)

	switch {
	case f.Cgroup, f.EngineCgroup && seen(p.CgroupPIDs, int64(t.ProcessCount)):
		g[DimProcessCount] = Enforced
	case f.UserNamespace && rl("nproc", int64(t.ProcessCount)) == Enforced:
		g[DimProcessCount] = Enforced
	case p.UID == 0 && !f.UserNamespace:
		g[DimProcessCount] = Unavailable
	case rl("nproc", int64(t.ProcessCount)+1<<20) == Enforced:
		g[DimProcessCount] = g[DimIdentity]
		if g[DimProcessCount] == Unavailable {
			g[DimProcessCount] = Unverified
		}
	default:
		g[DimProcessCount] = Unavailable
	}

	switch {
	case f.Unkillable:
		g[DimProcessTree] = Unavailable
	case f.Cgroup || f.PIDNamespace:
		g[DimProcessTree] = Enforced
	case f.Subreaper && (f.SignalScoped || g[DimIdentity] == Enforced):
		g[DimProcessTree] = Enforced
	case f.Subreaper:
		g[DimProcessTree] = Unverified
	case f.ExclusiveUID && g[DimIdentity] == Enforced:
		g[DimProcessTree] = Unverified
	default:
		g[DimProcessTree] = Unavailable
	}

	g[DimEnvironment] = Enforced
	for _, name := range p.Env {
		if !slices.Contains(allowedEnv, name) && !slices.Contains(envAllowlist, name) &&
			!(t.Network == NetworkRules && slices.Contains(EgressEnvNames, name)) {
			g[DimEnvironment] = Unavailable
		}
	}

	for d, v := range f.Graded {
		g[d] = v
	}

	iso := LevelProcess
	if f.MountBoundary && f.PIDNamespace && f.NetNamespace && g[DimFilesystem] == Enforced {
		iso = LevelIsolated
	}
	return grading{
		guarantees:    g,
		isolation:     iso,
		networkDenied: t.Network == NetworkNone && g[DimNetwork] != Unavailable,
		noMemoryCap:   f.NoMemoryCap,
		lacking:       f.Lacking,
		boundary: f.UserNamespace && f.MountBoundary && f.PIDNamespace && f.NetNamespace &&
			g[DimFilesystem] == Enforced && g[DimNetwork] == Enforced && g[DimProcessTree] == Enforced,
	}
}

// CPUGraceSeconds is how far RLIMIT_CPU's hard limit (SIGKILL) lies past its soft limit
// (SIGXCPU): the bootstrap flushes the program's output at SIGXCPU and ends it there, and a
// program that ignores SIGXCPU gets at most this much more CPU time.
const CPUGraceSeconds = 1

// CPUHardRlimit is RLIMIT_CPU's hard limit for a cpu_seconds limit.
func CPUHardRlimit(seconds float64) uint64 { return CPURlimit(seconds) + CPUGraceSeconds }

// CPURlimit is the whole number of seconds RLIMIT_CPU's soft limit is set to: the kernel
// counts CPU time in whole seconds, so a fractional limit rounds up.
func CPURlimit(seconds float64) uint64 {
	s := uint64(seconds)
	if float64(s) < seconds {
		s++
	}
	if s == 0 {
		s = 1
	}
	return s
}

// separated says why a child forked from a template (Facts.Forked) is not kept apart from its
// siblings, as its probe saw itself before any program byte, or "" when it is, or was not
// forked: it must be the pid 1 of a pid namespace of its own and see no other process in
// /proc, and run with no_new_privs, a seccomp filter, no effective capability and, when its
// facts claim Landlock, under a Landlock domain (opening / for reading refused). A step the
// template or its child skipped or that failed silently shows here, and the host refuses the
// child (fail closed) rather than grade around it.
func separated(p wire.Probe, f Facts) string {
	if f.Forked == nil {
		return ""
	}
	var why []string
	if p.PID != 1 || p.ProcPIDs != 1 {
		why = append(why, fmt.Sprintf("it is pid %d and sees %d processes, not its namespace's pid 1 alone", p.PID, p.ProcPIDs))
	}
	if p.NoNewPrivs != 1 {
		why = append(why, fmt.Sprintf("NoNewPrivs is %d", p.NoNewPrivs))
	}
	if p.Seccomp != 2 {
		why = append(why, fmt.Sprintf("Seccomp is %d, not a filter", p.Seccomp))
	}
	if strings.Trim(p.CapEff, "0") != "" || p.CapEff == "" {
		why = append(why, "effective capabilities "+strconv.Quote(p.CapEff))
	}
	if f.Landlock && p.LandlockRoot != "refused" {
		why = append(why, "no Landlock domain: opening / for reading was "+strconv.Quote(p.LandlockRoot)+", not refused")
	}
	return strings.Join(why, "; ")
}
