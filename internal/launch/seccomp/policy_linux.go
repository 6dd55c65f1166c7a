//go:build linux

package seccomp

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	bpf "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// Program is Policy(networkNone) compiled for this build's ABI, led by a guard that refuses
// (EPERM) every call made through another ABI (the 32-bit entry points, x32): a filter written
// for native numbers does not see those, so without it a few bytes of machine code would make
// an inet socket anyway.
func Program(networkNone bool) ([]unix.SockFilter, error) {
	return programOf(Policy(networkNone))
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
