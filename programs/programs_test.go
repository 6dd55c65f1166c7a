package programs

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// TestCheck: a program is saved under a lowercase Python name, with main's signature as its
// input schema and the hash of its text as its version; anything else is refused, saying why.
func TestCheck(t *testing.T) {
	p, err := Check("t", "", "refund_order", "async def main(order_id: str):\n    return order_id\n", " Refunds. ")
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != Version(p.Code) || !strings.HasPrefix(p.Version, "sha256:") || p.Description != "Refunds." || !strings.Contains(string(p.InputSchema), `"required":["order_id"]`) {
		t.Errorf("Check = %+v", p)
	}
	if Version(p.Code+" ") == p.Version {
		t.Error("two texts have one version")
	}
	for name, code := range map[string]string{
		"Refund":  "async def main(): pass",
		"a__b":    "async def main(): pass",
		"refund":  "def main(x: str): pass",
		"refund2": strings.Repeat("#", MaxCodeBytes+1),
	} {
		if _, err := Check("t", "", name, code, ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("Check(%q) = %v, want ErrInvalid", name, err)
		}
	}
}

// TestProgram: a call runs the text, then main awaited with the checked arguments as a
// Python string of JSON no argument can break out of.
func TestProgram(t *testing.T) {
	p, err := Check("t", "", "echo", "async def main(s: str, n: int = 1):\n    return s * n\n", "")
	if err != nil {
		t.Fatal(err)
	}
	code, err := Program(p, []byte(`{"s":"a\"))\nimport os #\u2028"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(code, "\n\nreturn await main(**__import__(\"json\").loads(\"{\\\"s\\\":\\\"a\\\\\\\"))\\\\nimport os #\\\\u2028\\\"}\"))\n") {
		t.Errorf("Program's last line: %q", code[strings.LastIndex(code[:len(code)-1], "\n")+1:])
	}
	for _, bad := range []string{`{"n":2}`, `{"s":1}`, `{"s":"a","x":1}`, `[1]`} {
		if _, err := Program(p, []byte(bad)); err == nil {
			t.Errorf("Program(%s) ran; want the arguments refused", bad)
		}
	}
}

// TestReach: a program reaches the tools it names (by name or Python name), all of them when
// it names one only at run time.
func TestReach(t *testing.T) {
	tools := [][2]string{{"shop__order", "shop__order"}, {"shop__refund", "shop__refund"}, {"docs__list-repos", "docs__list_repos"}}
	for code, want := range map[string][]string{
		"await shop__order(order_id='1')":           {"shop__order"},
		"await docs__list_repos()\n# shop__refunds": {"docs__list-repos"},
		"x = 1": {},
		"await call_tool('shop__' + 'refund', {})":  nil,
		"await globals()['shop__ref' + 'und'](a=1)": nil,
	} {
		got := Reach(code, tools)
		if (got == nil) != (want == nil) || !slices.Equal(got, want) {
			t.Errorf("Reach(%q) = %#v, want %#v", code, got, want)
		}
	}
}

// TestOfferedAs: what `programs save` says names the tool each agent that runs code is offered,
// under that agent's prefix, and only the program's own agent when it has one.
func TestOfferedAs(t *testing.T) {
	prefixes := map[string]string{"default": "", "ops": "shop", "triage": ""}
	p := budget.SavedProgram{Tenant: "t", Name: "refund"}
	if got, want := offeredAs(p, prefixes), "offered as saved__refund to agent default, triage; as shop__refund to agent ops"; got != want {
		t.Errorf("offeredAs = %q, want %q", got, want)
	}
	p.Agent = "ops"
	if got, want := offeredAs(p, prefixes), "offered as shop__refund to agent ops"; got != want {
		t.Errorf("offeredAs = %q, want %q", got, want)
	}
	p.Agent = "gone"
	if got := offeredAs(p, prefixes); !strings.Contains(got, "agent gone of tenant t does not run code") {
		t.Errorf("offeredAs = %q", got)
	}
}
