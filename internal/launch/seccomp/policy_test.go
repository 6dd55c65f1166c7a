//go:build linux

package seccomp

import (
	"encoding/binary"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"golang.org/x/sys/unix"
)

// TestPolicyOneDefinition: the compiled program and the containers' JSON profile are both the
// policy, for either network setting: the profile carries every refusal with its names, errno
// and conditions, and nothing else; the program compiles within the kernel's bound behind the
// foreign-ABI guard; and network none adds exactly the inet refusal.
func TestPolicyOneDefinition(t *testing.T) {
	for _, networkNone := range []bool{false, true} {
		policy := Policy(networkNone)
		prog, err := Program(networkNone)
		if err != nil {
			t.Fatalf("Program(%v): %v", networkNone, err)
		}
		native, _ := nativeArch()
		if len(prog) < 6 || prog[0].K != 4 || prog[1].K != native || prog[4].K != x32SyscallBit {
			t.Errorf("Program(%v) does not open with the foreign-ABI guard: %+v", networkNone, prog[:min(6, len(prog))])
		}
		if b := programBytes(prog); len(b) != 8*len(prog) {
			t.Errorf("programBytes: %d bytes for %d instructions", len(b), len(prog))
		}

		raw, err := OCIProfile(networkNone, runtime.GOARCH)
		if err != nil {
			t.Fatalf("OCIProfile(%v): %v", networkNone, err)
		}
		var profile struct {
			DefaultAction string   `json:"defaultAction"`
			Architectures []string `json:"architectures"`
			Syscalls      []struct {
				Names    []string `json:"names"`
				Action   string   `json:"action"`
				ErrnoRet uint     `json:"errnoRet"`
				Args     []struct {
					Index    uint   `json:"index"`
					Value    uint64 `json:"value"`
					ValueTwo uint64 `json:"valueTwo"`
					Op       string `json:"op"`
				} `json:"args"`
			} `json:"syscalls"`
		}
		if err := json.Unmarshal(raw, &profile); err != nil {
			t.Fatalf("the profile is not JSON: %v", err)
		}
		if profile.DefaultAction != "SCMP_ACT_ALLOW" || len(profile.Architectures) != 1 || profile.Architectures[0] != ociArch[runtime.GOARCH] {
			t.Errorf("profile default %q, architectures %q: want allow, and this build's architecture only", profile.DefaultAction, profile.Architectures)
		}
		if len(profile.Syscalls) != len(policy) {
			t.Fatalf("the profile has %d rules, the policy %d", len(profile.Syscalls), len(policy))
		}
		for i, r := range policy {
			s := profile.Syscalls[i]
			if !slices.Equal(s.Names, r.Names) || s.Action != "SCMP_ACT_ERRNO" || s.ErrnoRet != uint(r.Errno) || len(s.Args) != len(r.When) {
				t.Errorf("rule %d: profile %+v, policy %+v", i, s, r)
				continue
			}
			for j, a := range r.When {
				want := map[ArgOp]string{ArgEqual: "SCMP_CMP_EQ", ArgNotEqual: "SCMP_CMP_NE", ArgHasBit: "SCMP_CMP_MASKED_EQ"}[a.Op]
				got := s.Args[j]
				if got.Index != a.Index || got.Value != a.Value || got.Op != want || (a.Op == ArgHasBit && got.ValueTwo != a.Value) {
					t.Errorf("rule %d condition %d: profile %+v, policy %+v", i, j, got, a)
				}
			}
		}
	}
	// Network none adds the inet refusal and nothing else.
	with, without := Policy(true), Policy(false)
	if len(with) != len(without)+1 {
		t.Fatalf("network none adds %d rules", len(with)-len(without))
	}
	last := with[len(with)-1]
	if !slices.Equal(last.Names, []string{"socket"}) || len(last.When) != 1 || last.When[0].Op != ArgNotEqual || last.When[0].Value != unix.AF_UNIX {
		t.Errorf("network none's rule: %+v", last)
	}
	// Every bit condition tests a single bit: the profile's masked comparison means "this bit
	// set" only then.
	for _, r := range with {
		for _, a := range r.When {
			if a.Op == ArgHasBit && a.Value&(a.Value-1) != 0 {
				t.Errorf("%v: a bit condition on several bits (%#x)", r.Names, a.Value)
			}
		}
	}
}

// TestProgramDecides runs the compiled program, as the kernel would, on system calls a
// program makes: each refusal refuses what it names and nothing else, whatever came before it
// in the program (a library program once compared an argument as if it were the number).
func TestProgramDecides(t *testing.T) {
	gate.AppliesOnly(t, runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64", "the table of system call numbers is amd64's and arm64's")
	nr := func(name string) uint32 {
		n, ok := map[string]map[string]uint32{
			"amd64": {"socket": 41, "unshare": 272, "clone": 56, "clone3": 435, "keyctl": 250, "mount": 165, "open": 2, "read": 0,
				"io_uring_setup": 425, "bpf": 321, "getpid": 39, "ptrace": 101},
			"arm64": {"socket": 198, "unshare": 97, "clone": 220, "clone3": 435, "keyctl": 219, "mount": 40, "open": 56, "read": 63,
				"io_uring_setup": 425, "bpf": 280, "getpid": 172, "ptrace": 117},
		}[runtime.GOARCH][name]
		if !ok {
			t.Fatalf("no number for %s", name)
		}
		return n
	}
	native, _ := nativeArch()
	errno := func(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	for _, tc := range []struct {
		networkNone bool
		call        string
		args        [6]uint64
		arch        uint32
		want        uint32
	}{
		{false, "socket", [6]uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, 0, allow},
		{true, "socket", [6]uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, 0, errno(unix.EACCES)},
		{true, "socket", [6]uint64{unix.AF_INET6, unix.SOCK_DGRAM, 17}, 0, errno(unix.EACCES)},
		{true, "socket", [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, 0, allow},
		{false, "socket", [6]uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE}, 0, allow},
		{false, "socket", [6]uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_NETFILTER}, 0, errno(unix.EACCES)},
		{false, "socket", [6]uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_XFRM}, 0, errno(unix.EACCES)},
		{true, "socket", [6]uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE}, 0, errno(unix.EACCES)},
		{false, "unshare", [6]uint64{unix.CLONE_NEWUSER}, 0, errno(unix.EPERM)},
		{false, "unshare", [6]uint64{unix.CLONE_NEWUSER | unix.CLONE_NEWNS}, 0, errno(unix.EPERM)},
		{false, "unshare", [6]uint64{unix.CLONE_FILES}, 0, allow},
		{false, "clone", [6]uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}, 0, errno(unix.EPERM)},
		{false, "clone", [6]uint64{uint64(unix.SIGCHLD)}, 0, allow},
		{false, "clone", [6]uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND}, 0, allow},
		{false, "clone3", [6]uint64{}, 0, errno(unix.ENOSYS)},
		{false, "keyctl", [6]uint64{0, ^uint64(2), 1}, 0, errno(unix.EPERM)},
		{false, "ptrace", [6]uint64{}, 0, errno(unix.EPERM)},
		{false, "mount", [6]uint64{}, 0, errno(unix.EPERM)},
		{false, "io_uring_setup", [6]uint64{}, 0, errno(unix.ENOSYS)},
		{false, "bpf", [6]uint64{}, 0, errno(unix.EPERM)},
		{false, "getpid", [6]uint64{}, 0, allow},
		{true, "read", [6]uint64{3, 0, 4096}, 0, allow},
		// An argument equal to a later rule's system call number changes nothing.
		{true, "open", [6]uint64{uint64(nr("socket")), 0, uint64(nr("unshare"))}, 0, allow},
		// Another ABI: refused whatever the call.
		{false, "getpid", [6]uint64{}, native ^ 1, errno(unix.EPERM)},
	} {
		prog, err := Program(tc.networkNone)
		if err != nil {
			t.Fatal(err)
		}
		arch := native
		if tc.arch != 0 {
			arch = tc.arch
		}
		if got := runFilter(t, prog, nr(tc.call), arch, tc.args); got != tc.want {
			t.Errorf("network none %v, %s%v: %#x, want %#x", tc.networkNone, tc.call, tc.args[:3], got, tc.want)
		}
		// A template's child: its filter stacked on the template's decides as the policy does.
		tpl, err := programOf(TemplatePolicy(tc.networkNone))
		if err != nil {
			t.Fatal(err)
		}
		child, err := programOf(TemplateChildPolicy(tc.networkNone))
		if err != nil {
			t.Fatal(err)
		}
		if got := stacked(runFilter(t, tpl, nr(tc.call), arch, tc.args), runFilter(t, child, nr(tc.call), arch, tc.args)); got != tc.want {
			t.Errorf("a template's child, network none %v, %s%v: %#x, want %#x", tc.networkNone, tc.call, tc.args[:3], got, tc.want)
		}
	}
}

// stacked is what the kernel returns for two filters' decisions on one call, the later
// installed second: the action of higher precedence (an errno over allow), and of two alike
// the later filter's.
func stacked(earlier, later uint32) uint32 {
	if earlier&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ALLOW {
		return later
	}
	if later&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ALLOW {
		return earlier
	}
	return later
}

// runFilter interprets prog (the classic BPF a seccomp filter is: loads of seccomp_data,
// jumps, returns) on one system call.
func runFilter(t *testing.T, prog []unix.SockFilter, nr, arch uint32, args [6]uint64) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.NativeEndian.PutUint32(data[0:], nr)
	binary.NativeEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.NativeEndian.PutUint64(data[16+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if int(in.K)+4 > len(data) {
				t.Fatalf("load past seccomp_data at %d", pc)
			}
			acc = binary.NativeEndian.Uint32(data[in.K:])
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(in.K)
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K,
			unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var cond bool
			switch in.Code & 0xf0 {
			case unix.BPF_JEQ:
				cond = acc == in.K
			case unix.BPF_JGT:
				cond = acc > in.K
			case unix.BPF_JGE:
				cond = acc >= in.K
			case unix.BPF_JSET:
				cond = acc&in.K != 0
			}
			if cond {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("instruction %#x at %d not interpreted", in.Code, pc)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}

// TestTemplatePolicy: a template's filter is the policy without the one refusal of mounts and
// setns (which it needs for each child), every other refusal kept, the refusal of new user
// namespaces first among them; its children's is that one refusal; and TemplateChildBytes is
// their program as the kernel reads it.
func TestTemplatePolicy(t *testing.T) {
	for _, networkNone := range []bool{false, true} {
		full, tpl := Policy(networkNone), TemplatePolicy(networkNone)
		if len(tpl) != len(full)-1 {
			t.Fatalf("TemplatePolicy(%v) has %d refusals, the policy %d", networkNone, len(tpl), len(full))
		}
		for _, r := range tpl {
			if slices.Contains(r.Names, "mount") || slices.Contains(r.Names, "setns") {
				t.Errorf("the template refuses %v", r.Names)
			}
		}
		if !slices.Contains(tpl[0].Names, "unshare") || tpl[0].When[0].Value != unix.CLONE_NEWUSER {
			t.Errorf("the template's first refusal is %v, not new user namespaces", tpl[0].Names)
		}
		if _, err := programOf(tpl); err != nil {
			t.Errorf("TemplatePolicy(%v) does not compile: %v", networkNone, err)
		}
		child := TemplateChildPolicy(networkNone)
		if len(child) != 1 || !slices.Contains(child[0].Names, "mount") || !slices.Contains(child[0].Names, "setns") {
			t.Errorf("TemplateChildPolicy(%v) = %v, want the refusal of mounts and setns alone", networkNone, child)
		}
		prog, _ := programOf(child)
		b, err := TemplateChildBytes(networkNone)
		if err != nil || len(b) != 8*len(prog) || binary.LittleEndian.Uint32(b[4:8]) != prog[0].K && binary.BigEndian.Uint32(b[4:8]) != prog[0].K {
			t.Errorf("TemplateChildBytes(%v): %d bytes for %d instructions (%v)", networkNone, len(b), len(prog), err)
		}
	}
}

// ociArch is the profile's architecture for each GOARCH the policy knows.
var ociArch = map[string]string{"amd64": "SCMP_ARCH_X86_64", "arm64": "SCMP_ARCH_AARCH64"}

// The policy is built on every system (a Mac's client hands a Linux VM its profile), with
// Linux's numbers written out: they are x/sys's for Linux. An engine names its architecture
// in its own words, and the profile is for that one; one the policy does not know is an error.
func TestLinuxNumbersAndEngineArchitectures(t *testing.T) {
	for _, n := range [][2]uint64{{uint64(errEPERM), uint64(unix.EPERM)}, {uint64(errEACCES), uint64(unix.EACCES)},
		{uint64(errENOSYS), uint64(unix.ENOSYS)}, {cloneNewUser, unix.CLONE_NEWUSER}, {afUnix, unix.AF_UNIX},
		{afNetlink, unix.AF_NETLINK}, {netlinkRoute, unix.NETLINK_ROUTE}} {
		if n[0] != n[1] {
			t.Errorf("the policy's Linux number %#x is x/sys's %#x", n[0], n[1])
		}
	}
	for machine, arch := range map[string]string{"x86_64": "SCMP_ARCH_X86_64", "amd64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64", "arm64": "SCMP_ARCH_AARCH64"} {
		raw, err := OCIProfile(true, machine)
		if err != nil || !strings.Contains(string(raw), `"`+arch+`"`) {
			t.Errorf("OCIProfile for %s: %v, want %s in it", machine, err, arch)
		}
	}
	if _, err := OCIProfile(true, "riscv64"); err == nil {
		t.Error("a profile for riscv64, which the policy does not know")
	}
}
