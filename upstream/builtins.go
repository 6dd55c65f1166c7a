package upstream

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// ListToolsPageSize is how many tools one list_tools page holds; QueryPageSize how many a
// page of search results holds (the best come first, so few are read).
const (
	ListToolsPageSize = 50
	QueryPageSize     = 10
)

// ListToolsArgs are the arguments of list_tools; every field is optional.
type ListToolsArgs struct {
	Server string `json:"server,omitempty"`
	Query  string `json:"query,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// ToolSummary is one entry of a list_tools page.
type ToolSummary struct {
	Name        string  `json:"name"`
	Alias       *string `json:"alias"`
	Server      string  `json:"server"`
	Description string  `json:"description"`
	Deferred    bool    `json:"deferred,omitempty"`
	// Unavailable says why the tool cannot be called, when it cannot.
	Unavailable string `json:"unavailable,omitempty"`
	// Score is the tool's BM25 relevance to the query (three decimals), when one was given.
	Score *float64 `json:"score,omitempty"`
}

// ListToolsPage is what list_tools answers.
type ListToolsPage struct {
	Tools      []ToolSummary `json:"tools"`
	NextCursor string        `json:"next_cursor,omitempty"`
	// Matched is how many tools matched the query, over all pages (absent without a query).
	Matched *int `json:"matched,omitempty"`
	// Problems maps a granted server (of those the page lists) to what is wrong with its
	// tools: it could not be listed, or tools were skipped or cut (Catalogue.Problems).
	Problems map[string]string `json:"problems,omitempty"`
}

// ToolInfo is what get_tool_info answers.
type ToolInfo struct {
	Name             string  `json:"name"`
	Alias            *string `json:"alias"`
	Server           string  `json:"server"`
	Title            string  `json:"title,omitempty"`
	Description      string  `json:"description"`
	InputSchema      any     `json:"input_schema"`
	OutputSchema     any     `json:"output_schema,omitempty"`
	Annotations      any     `json:"annotations,omitempty"`
	Deferred         bool    `json:"deferred,omitempty"`
	ApprovalRequired bool    `json:"approval_required,omitempty"`
	Unavailable      string  `json:"unavailable,omitempty"`
	// PythonStub is the binding as a Python stub (Tool.PythonStub): what a program may rely on.
	PythonStub string `json:"python_stub"`
	// OutputType says where the stub's return type comes from (observed.go).
	OutputType OutputType `json:"output_type"`
}

// ListTools answers list_tools over the tools a program may call, deferred servers included.
// Without a query the tools come in name order. A query ranks them by BM25 (search.go) over
// the words of name, title, description and parameter names: the best first, each with its
// score, Matched saying how many matched in all. The cursor is opaque to callers.
func (t *Turn) ListTools(a ListToolsArgs) (ListToolsPage, error) {
	start := 0
	if a.Cursor != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(a.Cursor, "o"))
		if err != nil || n < 0 || !strings.HasPrefix(a.Cursor, "o") {
			return ListToolsPage{}, fmt.Errorf("cursor %q is not one list_tools returned", a.Cursor)
		}
		start = n
	}
	var tools []*Tool
	for _, n := range t.names {
		if tool := t.bound[n]; a.Server == "" || tool.Server == a.Server {
			tools = append(tools, tool)
		}
	}
	size := ListToolsPageSize
	var scores []float64
	if strings.TrimSpace(a.Query) != "" {
		size = QueryPageSize
		hits := rank(tools, a.Query)
		tools, scores = tools[:0], make([]float64, 0, len(hits))
		for _, h := range hits {
			tools = append(tools, h.tool)
			scores = append(scores, math.Round(h.score*1000)/1000)
		}
	}
	page := ListToolsPage{Tools: []ToolSummary{}}
	if scores != nil {
		matched := len(tools)
		page.Matched = &matched
	}
	for i := start; i < len(tools) && i < start+size; i++ {
		tool := tools[i]
		s := ToolSummary{
			Name: tool.Name, Alias: aliasPtr(tool), Server: tool.Server,
			Description: tool.Summary(), Deferred: tool.Deferred, Unavailable: tool.Unavailable,
		}
		if scores != nil {
			s.Score = &scores[i]
		}
		page.Tools = append(page.Tools, s)
	}
	if start+size < len(tools) {
		page.NextCursor = "o" + strconv.Itoa(start+size)
	}
	for server, p := range t.Problems() {
		if a.Server == "" || a.Server == server {
			if page.Problems == nil {
				page.Problems = map[string]string{}
			}
			page.Problems[server] = p
		}
	}
	return page, nil
}

func aliasPtr(tool *Tool) *string {
	if a := tool.Alias(); a != "" {
		return &a
	}
	return nil
}

// ToolInfo answers get_tool_info for a tool a program may call. A name that is not one gives
// the reason (unavailable or denied). A tool without an output schema whose results this
// tenant has seen ObservedAfter times or more returns their observed type in its stub; with
// a ShapeStore the results seen are every replica's, read from it under ctx.
func (t *Turn) ToolInfo(ctx context.Context, name string) (ToolInfo, *failure.Error) {
	tool := t.bound[name]
	if tool == nil {
		if matchAny(t.deny, name) {
			return ToolInfo{}, refusal(failure.Denied, "%s is denied by this tenant's policy", name)
		}
		return ToolInfo{}, refusal(failure.Unavailable, "no tool named %q is available", name)
	}
	info := ToolInfo{
		Name: tool.Name, Alias: aliasPtr(tool), Server: tool.Server, Title: tool.Def.Title,
		Description: tool.Def.Description, InputSchema: tool.Def.InputSchema,
		OutputSchema: tool.Def.OutputSchema, Deferred: tool.Deferred,
		ApprovalRequired: t.NeedsApproval(tool), Unavailable: tool.Unavailable,
	}
	var observed []byte
	info.OutputType, observed = t.observations().outputType(ctx, tool)
	info.PythonStub = tool.pythonStubReturning(observed, info.OutputType)
	if tool.Def.Annotations != nil {
		info.Annotations = tool.Def.Annotations
	}
	return info, nil
}
