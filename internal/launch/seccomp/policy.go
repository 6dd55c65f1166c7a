package seccomp

import (
	"encoding/json"
	"fmt"
	"slices"
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
	Errno Errno
	When  []Arg
}

// Errno is a Linux error number: the policy is Linux's whatever system builds it (a client of
// a container engine in a VM hands the engine its profile), so its numbers are Linux's own
// below, never the building system's (policy_linux_test.go checks them against x/sys).
type Errno uint32

// Linux's values the policy names.
const (
	errEPERM     Errno = 1
	errEACCES    Errno = 13
	errENOSYS    Errno = 38
	cloneNewUser       = 0x10000000
	afUnix             = 1
	afNetlink          = 16
	netlinkRoute       = 0
)

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
			Names: []string{"unshare", "clone"}, Errno: errEPERM, When: []Arg{{Index: 0, Op: ArgHasBit, Value: cloneNewUser}}},
		{Why: "clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc fall back to clone, whose flags it can",
			Names: []string{"clone3"}, Errno: errENOSYS},
		{Why: "entering another namespace, and mounting: nothing a program needs, and only ever possible past the refusals above",
			Names: []string{"setns", "mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
				"open_tree", "mount_setattr"}, Errno: errEPERM},
		{Why: "kernel objects that outlive an execution or that every process of a uid shares (kernelobjects_linux.go)",
			Names: kernelObjectSyscalls, Errno: errEPERM},
		{Why: "io_uring bypasses this filter for what it submits (sockets among them); ENOSYS, so libraries fall back",
			Names: []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}, Errno: errENOSYS},
		{Why: "kernel attack surface no program needs: BPF programs, userfaultfd (stalls the kernel at will), perf events",
			Names: []string{"bpf", "userfaultfd", "perf_event_open"}, Errno: errEPERM},
		{Why: "netlink but NETLINK_ROUTE (which getaddrinfo reads): netfilter, xfrm, audit and the rest reach kernel subsystems",
			Names: []string{"socket"}, Errno: errEACCES,
			When: []Arg{{Index: 0, Op: ArgEqual, Value: afNetlink}, {Index: 2, Op: ArgNotEqual, Value: netlinkRoute}}},
	}
	if networkNone {
		p = append(p, Refusal{Why: "network none: every socket family but AF_UNIX",
			Names: []string{"socket"}, Errno: errEACCES, When: []Arg{{Index: 0, Op: ArgNotEqual, Value: afUnix}}})
	}
	return p
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

// OCIProfile is Policy(networkNone) as the JSON seccomp profile podman and docker take
// (`--security-opt seccomp=FILE`), for one architecture of the kernel that runs the
// containers, as the engine names it (x86_64, amd64, aarch64, arm64): the runtime refuses
// calls through any other ABI (libseccomp's bad-architecture action), x32 included. An engine
// in a VM may run another architecture than the client's build (a client emulated by Rosetta).
func OCIProfile(networkNone bool, machine string) ([]byte, error) {
	var arch string
	switch machine {
	case "amd64", "x86_64":
		arch = "SCMP_ARCH_X86_64"
	case "arm64", "aarch64":
		arch = "SCMP_ARCH_AARCH64"
	default:
		return nil, fmt.Errorf("seccomp: no profile for the architecture %q", machine)
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
