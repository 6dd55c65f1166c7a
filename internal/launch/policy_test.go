//go:build linux

package launch

import (
	"encoding/json"
	"slices"
	"testing"

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

		raw, err := OCIProfile(networkNone)
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
		if profile.DefaultAction != "SCMP_ACT_ALLOW" || len(profile.Architectures) != 1 {
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
