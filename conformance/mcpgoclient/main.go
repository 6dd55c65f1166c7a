// Command mcpgoclient is a real MCP client on github.com/mark3labs/mcp-go, a Go SDK nobody
// here wrote: it connects to mcp-sandbox over stdio (-stdio, the command after --) or
// streamable HTTP (-url, with -token as the bearer), lists the tools, calls run_code with
// -code, and prints what it saw as one JSON object for the test in package conformance. With
// -elicit it declares elicitation and answers every question so (accept or decline): at MCP
// 2026-07-28 mcp-go gets the question as an input request and retries the call itself.
//
// It is a nested module so that mcp-go never enters the main module's dependencies.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// report is what the test reads.
type report struct {
	Protocol   string   `json:"protocol"`
	Tools      []string `json:"tools"`
	IsError    bool     `json:"is_error"`
	Text       string   `json:"text"`
	Structured any      `json:"structured"`
	// Asked are the questions the server put to the (scripted) person.
	Asked []string `json:"asked"`
}

// person answers every elicitation with one action and keeps the questions.
type person struct {
	action string
	mu     sync.Mutex
	asked  []string
}

func (p *person) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	p.mu.Lock()
	p.asked = append(p.asked, req.Params.Message)
	p.mu.Unlock()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseAction(p.action)}}, nil
}

func main() {
	url := flag.String("url", "", "streamable HTTP endpoint; empty: stdio, the command after --")
	token := flag.String("token", "", "bearer token for -url")
	code := flag.String("code", "6*7", "the program run_code runs")
	protocol := flag.String("protocol", "", "protocolVersion to ask for; empty: mcp-go's own choice")
	elicit := flag.String("elicit", "", "declare elicitation and answer every question so: accept or decline; empty: declare none")
	flag.Parse()
	if err := run(*url, *token, *code, *protocol, *elicit, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "mcpgoclient:", err)
		os.Exit(1)
	}
}

func run(url, token, code, protocol, elicit string, command []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var copts []client.ClientOption
	p := &person{action: elicit}
	if elicit != "" {
		copts = append(copts, client.WithElicitationHandler(p))
	}
	var c *client.Client
	if url != "" {
		var opts []transport.StreamableHTTPCOption
		if token != "" {
			opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
		}
		tr, err := transport.NewStreamableHTTP(url, opts...)
		if err != nil {
			return err
		}
		c = client.NewClient(tr, copts...)
	} else {
		if len(command) == 0 {
			return fmt.Errorf("neither -url nor a command after --")
		}
		tr := transport.NewStdioWithOptions(command[0], os.Environ(), command[1:])
		if err := tr.Start(context.Background()); err != nil { // the server lives as long as the client

			return fmt.Errorf("start: %w", err)
		}
		c = client.NewClient(tr, copts...)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = protocol
	init.Params.ClientInfo = mcp.Implementation{Name: "mcpgoclient", Version: "0"}
	ir, err := c.Initialize(ctx, init)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var r report
	r.Protocol = ir.ProtocolVersion
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	for _, t := range tools.Tools {
		r.Tools = append(r.Tools, t.Name)
	}
	call := mcp.CallToolRequest{}
	call.Params.Name = "run_code"
	call.Params.Arguments = map[string]any{"code": code}
	res, err := c.CallTool(ctx, call)
	if err != nil {
		return fmt.Errorf("tools/call run_code: %w", err)
	}
	r.IsError = res.IsError
	r.Structured = res.StructuredContent
	for _, ct := range res.Content {
		if tc, ok := mcp.AsTextContent(ct); ok {
			r.Text += tc.Text
		}
	}
	p.mu.Lock()
	r.Asked = p.asked
	p.mu.Unlock()
	return json.NewEncoder(os.Stdout).Encode(r)
}
