package upstream

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
	"github.com/mcp-sandbox/mcp-sandbox/toolshape/shapetest"
)

// stubCases are tools whose stubs must parse and type-check: every shape a stub renders.
var stubCases = []struct {
	name, in, out string
	want          []string // substrings of the stub
}{
	{"s__plain", `{"type":"object"}`, "", []string{"async def s__plain(**arguments: Any) -> Any:"}},
	{"s__none", `{"type":"object","properties":{},"additionalProperties":false}`, "", []string{"async def s__none() -> Any:"}},
	{"s__lookup", `{"type":"object","properties":{"sku":{"type":"string","description":"the \"SKU\" \\ here"},"limit":{"type":"integer"}},"required":["sku"]}`,
		`{"type":"object","properties":{"sku":{"type":"string"},"price":{"type":"number"}},"required":["sku"]}`,
		[]string{"async def s__lookup(*, sku: str, limit: int = ...) -> SLookupResult:", "class SLookupResult(TypedDict):", "price: NotRequired[float]"}},
	{"s__enum", `{"type":"object","properties":{"mode":{"type":"string","enum":["a","b'c","d\"e"]},"n":{"enum":[1,2,null]},"f":{"enum":[1.5,2]}},"required":["mode"]}`, "",
		[]string{`mode: Literal["a", "b'c", "d\"e"]`, "n: Literal[1, 2, None] = ...", "f: Any = ..."}},
	{"s__nested", `{"type":"object","properties":{"filter":{"type":"object","properties":{"from":{"type":"string"},"tags":{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"}},"required":["k"]}}},"required":["from"]},"meta":{"type":"object","additionalProperties":{"type":"integer"}},"opt":{"type":["string","null"]},"any":{"anyOf":[{"type":"string"},{"type":"integer"}]},"ref":{"$ref":"#/$defs/x"}}}`, "",
		[]string{`SNestedFilter = TypedDict("SNestedFilter", {"from": str`, "class SNestedFilterTagsItem(TypedDict):", "meta: dict[str, int] = ...", "opt: str | None = ...", "any: str | int = ...", "ref: Any = ..."}},
	{"s__odd", `{"type":"object","properties":{"user-id":{"type":"integer"},"class":{"type":"string"}},"required":["user-id"]}`, "",
		[]string{`SOddArguments = TypedDict("SOddArguments", {"user-id": int, "class": NotRequired[str]})`, "async def s__odd(**arguments: Any) -> Any:"}},
	{"s__list-repos", `{"type":"object","properties":{"owner":{"type":"string"}}}`, "",
		[]string{`async def call_tool(name: Literal["s__list-repos"], arguments: SListReposArguments) -> Any:`}},
	{"s__open", `{"type":"object","properties":{"arguments":{"type":"string"},"str":{"type":"object","properties":{"str":{"type":"string"}}}},"additionalProperties":true}`, "",
		[]string{"**_arguments: Any", `SOpenStr = TypedDict("SOpenStr", {"str": NotRequired[str]})`}},
}

func stubTool(t *testing.T, name, in, out string) *Tool {
	t.Helper()
	server, tool, _ := SplitName(name)
	def := &mcp.Tool{Name: tool, Description: "Does things.\nSecond line \"\"\" with quotes.", InputSchema: json.RawMessage(in)}
	if out != "" {
		def.OutputSchema = json.RawMessage(out)
	}
	return newTool(Server{Name: server}, def, slog.New(slog.DiscardHandler))
}

// TestPythonStubs: every rendered stub is Python that ast parses and mypy --strict accepts,
// and says what the case expects.
func TestPythonStubs(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for i, c := range stubCases {
		stub := stubTool(t, c.name, c.in, c.out).PythonStub()
		for _, w := range c.want {
			if !strings.Contains(stub, w) {
				t.Errorf("%s: stub lacks %q:\n%s", c.name, w, stub)
			}
		}
		f := filepath.Join(dir, fmt.Sprintf("stub_%d.pyi", i))
		if err := os.WriteFile(f, []byte(stub), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// Hostile schemas neither crash the renderer nor make a stub past its bound, and a huge
	// enum falls back to the plain stub, which still parses.
	enum := `{"enum":[` + strings.TrimSuffix(strings.Repeat(`"\u2028\u2029\u0000\u00ff",`, 200), ",") + `]}`
	var props []string
	for i := range 8 {
		props = append(props, fmt.Sprintf(`"p%d":%s`, i, enum))
	}
	huge := `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":["p0"]}`
	for i, s := range append(shapetest.Schemas, huge) {
		stub := stubTool(t, "s__hostile", s, "").PythonStub()
		if len(stub) > toolshape.MaxStubBytes {
			t.Errorf("schema %d: a stub of %d bytes", i, len(stub))
		}
		f := filepath.Join(dir, fmt.Sprintf("hostile_%d.pyi", i))
		if err := os.WriteFile(f, []byte(stub), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if s := stubTool(t, "s__huge", huge, "").PythonStub(); !strings.Contains(s, "async def s__huge(*, p0: Any, p1: Any = ..., p2: Any = ...") {
		t.Errorf("huge enum stub:\n%.300s", s)
	}
	shapetest.CheckPython(t, files)
}

// TestSignatureChecksKeywords: a closed schema takes exactly its properties, every required
// one present; an unknown keyword is named, with the near one it may have meant.
func TestSignatureChecksKeywords(t *testing.T) {
	tool := stubTool(t, "s__lookup", stubCases[2].in, "")
	for _, c := range []struct {
		args, want string
	}{
		{`{"sku":"A"}`, ""},
		{`{"sku":"A","limit":3}`, ""},
		{`{"skuu":"A"}`, `s__lookup takes no argument "skuu" (did you mean "sku"?); it takes sku, limit`},
		{`{"limit":3}`, `s__lookup is missing its required argument "sku"`},
	} {
		_, fe := tool.BindingArguments(json.RawMessage(c.args))
		switch {
		case c.want == "" && fe != nil:
			t.Errorf("%s: refused: %v", c.args, fe)
		case c.want != "" && (fe == nil || fe.Kind != failure.InvalidArguments || fe.Message != c.want):
			t.Errorf("%s: got %v, want invalid_arguments %q", c.args, fe, c.want)
		}
	}
	// The schema alone allows more keywords; the host's direct path keeps its rules.
	if _, fe := tool.Arguments(json.RawMessage(`{"sku":"A","extra":1}`)); fe != nil {
		t.Errorf("Arguments with an extra keyword: %v", fe)
	}
	for _, schema := range []string{`{"type":"object"}`,
		`{"type":"object","properties":{"a":{}},"anyOf":[{"properties":{"anything":{}}}]}`} {
		open := stubTool(t, "s__plain", schema, "")
		if _, fe := open.BindingArguments(json.RawMessage(`{"anything":1}`)); fe != nil {
			t.Errorf("%s refused a keyword: %v", schema, fe)
		}
	}
}

// TestSearchTerms: words split at case, punctuation and digits' edges, lowercased and lightly
// stemmed, so a query meets the forms a description uses.
func TestSearchTerms(t *testing.T) {
	got := strings.Join(terms("refundOrder: Refunding orders; list_invoices, get-sum, Replies 2FA"), " ")
	if want := "refund order refund order list invoice get sum reply 2fa"; got != want {
		t.Errorf("terms = %q, want %q", got, want)
	}
}

// TestRank: a tool matching every word ranks above those matching one; a tool sharing only a
// word nearly all tools have is not a match; parameter names count.
func TestRank(t *testing.T) {
	mk := func(name, schema string) *Tool { return stubTool(t, "s__"+name, schema, "") }
	var tools []*Tool
	for i := range 40 {
		tl := mk(fmt.Sprintf("t%02d", i), `{"type":"object"}`)
		tl.Def.Description = fmt.Sprintf("A tool that lists things number %d.", i)
		tools = append(tools, tl)
	}
	target := mk("refund", `{"type":"object","properties":{"order_id":{"type":"string"}}}`)
	target.Def.Description = "Gives the money back."
	other := mk("cancel", `{"type":"object","properties":{"order_id":{"type":"string"}}}`)
	other.Def.Description = "Cancels a tool's order."
	tools = append(tools, target, other)
	hits := rank(tools, "refund order tool")
	if len(hits) != 2 || hits[0].tool != target || hits[1].tool != other {
		for _, h := range hits {
			t.Logf("%s %.3f", h.tool.Name, h.score)
		}
		t.Fatalf("rank gave %d hits, want s__refund then s__cancel", len(hits))
	}
	if len(rank(tools, "")) != 0 || len(rank(tools, "zebra")) != 0 {
		t.Error("an empty or unmatched query matched")
	}
}

// TestMatch: documents that are not tools (saved programs) match as tools do: by name,
// description and parameter names, best first, a tie in the documents' order.
func TestMatch(t *testing.T) {
	docs := []Document{
		{Name: "lookup_order", Description: "Looks an order up.", Params: []string{"order_id"}},
		{Name: "refund_orders", Description: "Refunds orders.", Params: []string{"order_ids"}},
		{Name: "weather", Description: "Says the weather.", Params: []string{"city"}},
	}
	if got := Match("lookup", docs); !slices.Equal(got, []int{0}) {
		t.Errorf("Match(lookup) = %v, want [0]", got)
	}
	if got := Match("refunding order", docs); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("Match(refunding order) = %v, want [1 0]", got)
	}
	if Match("", docs) != nil || Match("zebra", docs) != nil {
		t.Error("an empty or unmatched query matched")
	}
}
