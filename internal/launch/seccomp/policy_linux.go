//go:build linux

package seccomp

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	bpf "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// The seccomp policy is one definition, Policy, with three readers: the init helper loads it
// (the process and namespaces backends), hands it compiled to bwrap, which loads it inside the
// sandbox once its namespaces are made (launch.Spec.SeccompHandOff), and the container backend
// passes it to the runtime as a JSON profile (OCIProfile). The helper gets it compiled in its
// Spec (Filter, which internal/spawn fills in): it only installs bytes. So no mechanism runs a program under a weaker
// filter than another: each refusal below holds for every backend that has seccomp at all.
//
// Everything not refused is allowed: the other confinement (identity, no_new_privs, no
// capabilities, namespaces, Landlock) does the rest, and the policy removes what it leaves
// reachable that recent kernel privilege escalations went through, and what two executions
// could share.

// Refusal is one rule of the policy: calls of Names fail with Errno, when every condition of
// When holds (always, without any).
type Refusal struct {
	Why   string
	Names []string
	Errno unix.Errno
	When  []Arg
}

// Arg is one condition on a system call's argument.
type Arg struct {
	Index uint
	Op    ArgOp
	Value uint64
}

// ArgOp compares an argument with a value.
type ArgOp int

// The comparisons a Refusal may make. ArgHasBit takes a single-bit Value.
const (
	ArgEqual ArgOp = iota
	ArgNotEqual
	ArgHasBit
)

// Policy is the seccomp policy of every sandbox; networkNone adds the refusal of every socket
// family but AF_UNIX, for an execution whose terms grant no network.
func Policy(networkNone bool) []Refusal {
	p := []Refusal{
		{Why: "user namespaces: inside a new one a program holds every capability over new mount, " +
			"network and other namespaces (tmpfs or overlayfs over /usr, nf_tables), the route of recent kernel escalations",
			Names: []string{"unshare", "clone"}, Errno: unix.EPERM, When: []Arg{{Index: 0, Op: ArgHasBit, Value: unix.CLONE_NEWUSER}}},
		{Why: "clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc fall back to clone, whose flags it can",
			Names: []string{"clone3"}, Errno: unix.ENOSYS},
		{Why: "entering another namespace, and mounting: nothing a program needs, and only ever possible past the refusals above",
			Names: []string{"setns", "mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
				"open_tree", "mount_setattr"}, Errno: unix.EPERM},
		{Why: "kernel objects that outlive an execution or that every process of a uid shares (kernelobjects_linux.go)",
			Names: kernelObjectSyscalls, Errno: unix.EPERM},
		{Why: "io_uring bypasses this filter for what it submits (sockets among them); ENOSYS, so libraries fall back",
			Names: []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}, Errno: unix.ENOSYS},
		{Why: "kernel attack surface no program needs: BPF programs, userfaultfd (stalls the kernel at will), perf events",
			Names: []string{"bpf", "userfaultfd", "perf_event_open"}, Errno: unix.EPERM},
		{Why: "netlink but NETLINK_ROUTE (which getaddrinfo reads): netfilter, xfrm, audit and the rest reach kernel subsystems",
			Names: []string{"socket"}, Errno: unix.EACCES,
			When: []Arg{{Index: 0, Op: ArgEqual, Value: unix.AF_NETLINK}, {Index: 2, Op: ArgNotEqual, Value: unix.NETLINK_ROUTE}}},
	}
	if networkNone {
		p = append(p, Refusal{Why: "network none: every socket family but AF_UNIX",
			Names: []string{"socket"}, Errno: unix.EACCES, When: []Arg{{Index: 0, Op: ArgNotEqual, Value: unix.AF_UNIX}}})
	}
	return p
}

// Program is Policy(networkNone) compiled for this build's ABI, led by a guard that refuses
// (EPERM) every call made through another ABI (the 32-bit entry points, x32): a filter written
// for native numbers does not see those, so without it a few bytes of machine code would make
// an inet socket anyway.
func Program(networkNone bool) ([]unix.SockFilter, error) {
	return programOf(Policy(networkNone))
}

// TemplatePolicy is Policy(networkNone) without the refusal of setns and mounts: the filter of
// a template (Spec.Template), which makes a mount and a pid namespace per child and mounts its
// tmpfs workspace, /tmp and /proc. Every child inherits it and installs TemplateChildPolicy
// itself (its bytes are TemplateChildBytes), stacked on it, before any program byte: the two
// together refuse what Policy refuses.
func TemplatePolicy(networkNone bool) []Refusal {
	var p []Refusal
	for _, r := range Policy(networkNone) {
		if !slices.Contains(r.Names, "mount") {
			p = append(p, r)
		}
	}
	return p
}

// TemplateChildPolicy is what Policy(networkNone) refuses and TemplatePolicy(networkNone) does
// not: the refusal of setns and mounts. A filter of the whole policy, stacked on the
// template's, decided every other call twice, and the kernel compiled all of it again for
// each child (docs/design.md §19.3).
func TemplateChildPolicy(networkNone bool) []Refusal {
	var p []Refusal
	for _, r := range Policy(networkNone) {
		if slices.Contains(r.Names, "mount") {
			p = append(p, r)
		}
	}
	return p
}

// TemplateChildBytes is TemplateChildPolicy(networkNone) compiled, led by the guard against
// other ABIs, as the kernel reads a sock_filter array: what a template's child hands to
// prctl(PR_SET_SECCOMP) unchanged. It is assembled once per variant and shared: the caller
// must not modify it.
func TemplateChildBytes(networkNone bool) ([]byte, error) {
	return assembled[variant{networkNone: networkNone, child: true}]()
}

// Filter is the program an init helper with this Spec's Seccomp, DenyInet and Template
// installs (launch.Spec.Filter): TemplatePolicy's for a template, Program's otherwise,
// assembled once per variant and shared.
func Filter(networkNone, template bool) ([]byte, error) {
	return assembled[variant{networkNone: networkNone, template: template}]()
}

type variant struct{ networkNone, template, child bool }

// assembled holds each variant's bytes, assembled on first use: the server starts a helper
// per execution, and the policy does not change while it runs.
var assembled = func() map[variant]func() ([]byte, error) {
	m := map[variant]func() ([]byte, error){}
	for _, v := range []variant{{false, false, false}, {true, false, false}, {false, true, false}, {true, true, false},
		{false, false, true}, {true, false, true}} {
		m[v] = sync.OnceValues(func() ([]byte, error) {
			policy := Policy(v.networkNone)
			switch {
			case v.template:
				policy = TemplatePolicy(v.networkNone)
			case v.child:
				policy = TemplateChildPolicy(v.networkNone)
			}
			prog, err := programOf(policy)
			if err != nil {
				return nil, err
			}
			return programBytes(prog), nil
		})
	}
	return m
}()

func programOf(policy []Refusal) ([]unix.SockFilter, error) {
	native, ok := nativeArch()
	if !ok {
		return nil, fmt.Errorf("seccomp: no policy for %s", runtime.GOARCH)
	}
	// One library program per refusal, chained: go-seccomp-bpf compares an argument by loading
	// it over the system call's number, and a later group of the same program then compares
	// the argument as if it were the number (an inet socket slipped past the refusal after the
	// netlink one). Each chunk loads the number afresh, and its "allow" jumps to the next.
	// A chunk with conditions holds one system call, for the same reason.
	var chunks [][]unix.SockFilter
	for _, r := range policy {
		parts := []Refusal{r}
		if len(r.When) > 0 {
			parts = parts[:0]
			for _, n := range r.Names {
				parts = append(parts, Refusal{Names: []string{n}, Errno: r.Errno, When: r.When})
			}
		}
		for _, part := range parts {
			chunk, err := compile(part)
			if err != nil {
				return nil, err
			}
			chunks = append(chunks, chunk)
		}
	}
	const (
		ldAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jgeK   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		retK   = unix.BPF_RET | unix.BPF_K
	)
	deny := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)&unix.SECCOMP_RET_DATA)
	prog := []unix.SockFilter{
		{Code: ldAbsW, K: 4},                         // seccomp_data.arch
		{Code: jeqK, Jt: 1, Jf: 0, K: native},        // native arch → the x32 check
		{Code: retK, K: deny},                        // foreign arch
		{Code: ldAbsW, K: 0},                         // seccomp_data.nr
		{Code: jgeK, Jt: 0, Jf: 1, K: x32SyscallBit}, // x32 → deny
		{Code: retK, K: deny},
	}
	for i, chunk := range chunks {
		if i < len(chunks)-1 {
			for j := range chunk {
				if chunk[j].Code == unix.BPF_RET|unix.BPF_K && chunk[j].K == unix.SECCOMP_RET_ALLOW {
					chunk[j] = unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JA, K: uint32(len(chunk) - j - 1)}
				}
			}
		}
		prog = append(prog, chunk...)
	}
	if len(prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: the policy compiles to %d instructions, past the kernel's %d", len(prog), unix.BPF_MAXINSNS)
	}
	return prog, nil
}

// compile is one refusal as a program of its own that allows everything else.
func compile(r Refusal) ([]unix.SockFilter, error) {
	g := bpf.SyscallGroup{Action: bpf.ActionErrno | bpf.Action(r.Errno)}
	if len(r.When) == 0 {
		g.Names = r.Names
	} else {
		var conds []bpf.Condition
		for _, a := range r.When {
			c := bpf.Condition{Argument: uint32(a.Index), Value: a.Value}
			switch a.Op {
			case ArgEqual:
				c.Operation = bpf.Equal
			case ArgNotEqual:
				c.Operation = bpf.NotEqual
			case ArgHasBit:
				c.Operation = bpf.BitsSet
			}
			conds = append(conds, c)
		}
		for _, n := range r.Names {
			g.NamesWithCondtions = append(g.NamesWithCondtions, bpf.NameWithConditions{Name: n, Conditions: conds})
		}
	}
	policy := bpf.Policy{DefaultAction: bpf.ActionAllow, Syscalls: []bpf.SyscallGroup{g}}
	insts, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: %v", err)
	}
	out := make([]unix.SockFilter, 0, len(insts))
	for _, in := range insts {
		raw, err := in.Assemble()
		if err != nil {
			return nil, fmt.Errorf("seccomp: %v", err)
		}
		out = append(out, unix.SockFilter{Code: raw.Op, Jt: raw.Jt, Jf: raw.Jf, K: raw.K})
	}
	return out, nil
}

// programBytes is prog as the kernel reads a sock_filter array: what bwrap's --seccomp takes.
func programBytes(prog []unix.SockFilter) []byte {
	const size = int(unsafe.Sizeof(unix.SockFilter{}))
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&prog[0])), len(prog)*size)...)
}

// OCIProfile is Policy(networkNone) as the JSON seccomp profile podman and docker take
// (`--security-opt seccomp=FILE`), for this build's architecture only: the runtime refuses
// calls through any other ABI (libseccomp's bad-architecture action), x32 included.
func OCIProfile(networkNone bool) ([]byte, error) {
	var arch string
	switch runtime.GOARCH {
	case "amd64":
		arch = "SCMP_ARCH_X86_64"
	case "arm64":
		arch = "SCMP_ARCH_AARCH64"
	default:
		return nil, fmt.Errorf("seccomp: no profile for %s", runtime.GOARCH)
	}
	type ociArg struct {
		Index    uint   `json:"index"`
		Value    uint64 `json:"value"`
		ValueTwo uint64 `json:"valueTwo"`
		Op       string `json:"op"`
	}
	type ociSyscall struct {
		Names    []string `json:"names"`
		Action   string   `json:"action"`
		ErrnoRet uint     `json:"errnoRet"`
		Args     []ociArg `json:"args"`
		Comment  string   `json:"comment,omitempty"`
	}
	profile := struct {
		DefaultAction string       `json:"defaultAction"`
		Architectures []string     `json:"architectures"`
		Syscalls      []ociSyscall `json:"syscalls"`
	}{DefaultAction: "SCMP_ACT_ALLOW", Architectures: []string{arch}}
	for _, r := range Policy(networkNone) {
		s := ociSyscall{Names: r.Names, Action: "SCMP_ACT_ERRNO", ErrnoRet: uint(r.Errno), Args: []ociArg{}, Comment: r.Why}
		for _, a := range r.When {
			o := ociArg{Index: a.Index, Value: a.Value}
			switch a.Op {
			case ArgEqual:
				o.Op = "SCMP_CMP_EQ"
			case ArgNotEqual:
				o.Op = "SCMP_CMP_NE"
			case ArgHasBit:
				o.Op, o.ValueTwo = "SCMP_CMP_MASKED_EQ", a.Value
			}
			s.Args = append(s.Args, o)
		}
		profile.Syscalls = append(profile.Syscalls, s)
	}
	return json.MarshalIndent(profile, "", "  ")
}
