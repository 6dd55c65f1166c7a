package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
)

// Bounds on what an A2A peer may make this host hold or do. The Agent Card is untrusted input
// like any upstream's tool list; its skills then pass the catalogue's admission (admit.go) as
// tools do: names, repeats, descriptions, titles and counts.
const (
	// maxCardBytes bounds one Agent Card.
	maxCardBytes = 1 << 20
	// maxSkills bounds the skills taken from one card; the rest are cut, and the cut said.
	maxSkills = 512
	// maxExamples bounds the examples of a skill copied into its description, each cut to
	// maxExampleBytes.
	maxExamples     = 5
	maxExampleBytes = 200
	// cardTTL is how long a card is trusted before the next turn reads it again: a peer has
	// no list_changed notification.
	cardTTL = 5 * time.Minute
	// pollFirst and pollMax bound the waits between tasks/get polls of an open task.
	pollFirst = time.Millisecond
	pollMax   = 500 * time.Millisecond
	// cancelGrace bounds the tasks/cancel sent for a task given up on.
	cancelGrace = 2 * time.Second
	// cardVersion is the A2A-Version the card is asked for: an agent that serves both
	// versions answers with its 1.0 card, which lists both; one on 0.3 only ignores it.
	cardVersion = a2aV10
	// SkillMetaKey is the key of message.metadata that names the skill a message is meant
	// for. A2A has no skill selector in message/send; an agent with one skill may ignore it.
	SkillMetaKey = "skillId"
)

// skillInputSchema is the input of every skill: A2A skills have no JSON schema, so a call is
// one message of a text part, a data part, or both.
var skillInputSchema = json.RawMessage(`{"type":"object",` +
	`"properties":{` +
	`"text":{"type":"string","description":"The message to the agent, sent as a text part."},` +
	`"data":{"type":"object","description":"Structured input, sent as a data part."}},` +
	`"minProperties":1,"additionalProperties":false}`)

// peer is the link of an A2A agent, where an MCP server's session is. It reads the agent's
// card for the conn's listing and sends one message per call, in A2A 1.0 or 0.3 as the card
// says (a2a_dialect.go). Its HTTP client is the one MCP HTTP upstreams use (Server.httpClient): the
// bearer resolved per request and sent to the configured origin only, cross-origin redirects
// refused.
type peer struct {
	c       *conn
	srv     Server
	client  *http.Client
	origin  *url.URL // the configured URL: the card and the endpoint must share its origin
	cardURL string
	logger  *slog.Logger
	ids     atomic.Int64

	mu     sync.Mutex
	via    dialect   // where and how to speak, as the last card said
	readAt time.Time // when the last card was read
}

func (p *peer) dialect() dialect {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.via
}

func newPeer(c *conn) *peer {
	s := c.srv
	origin, _ := url.Parse(s.URL) // Validate checked it
	card := origin
	if p := strings.TrimSuffix(origin.Path, "/"); !strings.HasSuffix(p, "/.well-known/agent-card.json") && !strings.HasSuffix(p, "/.well-known/agent.json") {
		card = origin.JoinPath(".well-known", "agent-card.json")
	}
	return &peer{c: c, srv: s, client: s.httpClient(), origin: origin, cardURL: card.String(), logger: c.pool.logger}
}

// live is false: a peer holds no session, each call is its own exchange.
func (p *peer) live() bool { return false }

// shutdown has nothing to end: the Pool's end ends the calls in flight (conn.bounded).
func (p *peer) shutdown() {}

// due reports whether the card is older than cardTTL: a peer announces no changes.
func (p *peer) due() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.readAt.IsZero() && time.Since(p.readAt) > cardTTL
}

// list reads the Agent Card and returns its skills as a listing of tool definitions.
func (p *peer) list(ctx context.Context) (listing, error) {
	ctx, cancel := context.WithTimeout(ctx, p.srv.connectTimeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.cardURL, nil)
	if err != nil {
		return listing{}, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("A2A-Version", cardVersion)
	body, err := p.do(req, maxCardBytes)
	if err != nil {
		return listing{}, fmt.Errorf("reading the agent card: %w", err)
	}
	via, skills, err := p.readCard(body)
	if err != nil {
		return listing{}, err
	}
	p.mu.Lock()
	changed := via.version != p.via.version
	p.via, p.readAt = via, time.Now()
	p.mu.Unlock()
	if changed { // said once, and again if the agent moves: what the operator needs to know
		p.logger.Info("a2a agent speaks", "server", p.srv.Name, "protocol", via.version)
	}
	return skillListing(skills), nil
}

// readCard reads a card of either version. A card listing supportedInterfaces is read as
// 1.0's (a 0.3 card that embeds them too, as the JS SDK's legacy layer serves), and the
// interface picked among them; any other as 0.3's.
func (p *peer) readCard(body []byte) (dialect, []a2a.AgentSkill, error) {
	v10, err := hasInterfaces(body)
	if err != nil {
		return dialect{}, nil, err
	}
	if v10 {
		var c card
		if err := json.Unmarshal(body, &c); err != nil {
			return dialect{}, nil, fmt.Errorf("the agent card is not valid JSON of A2A 1.0: %s", toolshape.Clip(err.Error(), 300))
		}
		in, version, ok := pickInterface(c.SupportedInterfaces)
		if !ok {
			return dialect{}, nil, errors.New("the agent card lists no JSON-RPC interface of A2A 1.0 or 0.3")
		}
		endpoint, err := p.onOrigin(in.URL)
		if err != nil {
			return dialect{}, nil, err
		}
		return dialect{endpoint: endpoint, version: version, tenant: in.Tenant}, c.Skills, nil // as many as 1 MiB holds; skillListing cuts
	}
	var c a2a03.AgentCard
	if err := json.Unmarshal(body, &c); err != nil {
		return dialect{}, nil, fmt.Errorf("the agent card is not valid JSON of A2A %s: %s", a2aV03, toolshape.Clip(err.Error(), 300))
	}
	endpoint, err := p.endpointOf(&c)
	if err != nil {
		return dialect{}, nil, err
	}
	skills := make([]a2a.AgentSkill, len(c.Skills))
	for i, s := range c.Skills {
		skills[i] = a2a.AgentSkill{ID: s.ID, Name: s.Name, Description: s.Description,
			Examples: s.Examples, InputModes: s.InputModes, OutputModes: s.OutputModes}
	}
	return dialect{endpoint: endpoint, version: a2aV03}, skills, nil
}

// endpointOf picks a 0.3 card's JSON-RPC endpoint. It must be on the configured origin: the
// card is the peer's word, and the credential goes nowhere else.
func (p *peer) endpointOf(card *a2a03.AgentCard) (string, error) {
	if v := card.ProtocolVersion; v != "" && !strings.HasPrefix(v, "0.") {
		return "", fmt.Errorf("the agent card declares A2A %q but lists no supportedInterfaces, which A2A 1.0 cards name their endpoints by", toolshape.Clip(v, 32))
	}
	raw := ""
	if card.PreferredTransport == "" || card.PreferredTransport == a2a03.TransportProtocolJSONRPC {
		raw = card.URL
	}
	for _, in := range card.AdditionalInterfaces {
		if raw == "" && in.Transport == a2a03.TransportProtocolJSONRPC {
			raw = in.URL
		}
	}
	if raw == "" {
		return "", errors.New("the agent card names no JSON-RPC endpoint")
	}
	return p.onOrigin(raw)
}

// onOrigin checks that the endpoint raw is on the configured origin.
func (p *peer) onOrigin(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || !sameOrigin(u, p.origin) {
		return "", errors.New("the agent card's JSON-RPC endpoint is not on the configured origin; refused, since the credential goes nowhere else")
	}
	return u.String(), nil
}

// skillListing turns skills into tool definitions, the id as the name (never mangled: an id
// that is no tool name is skipped by admission and said), at most maxSkills of them.
func skillListing(skills []a2a.AgentSkill) listing {
	var l listing
	if len(skills) > maxSkills {
		l.cut = fmt.Sprintf("the agent card was cut after %d skills of %d", maxSkills, len(skills))
		skills = skills[:maxSkills]
	}
	for _, s := range skills {
		l.defs = append(l.defs, &mcp.Tool{
			Name:        s.ID,
			Title:       oneLine(s.Name),
			Description: skillDescription(s),
			InputSchema: skillInputSchema,
		})
	}
	return l
}

// skillDescription is the skill's description, then its examples and modes: what a program
// reads with get_tool_info to know what to send. Admission bounds the whole.
func skillDescription(s a2a.AgentSkill) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(s.Description))
	if n := min(len(s.Examples), maxExamples); n > 0 {
		b.WriteString("\n\nExamples:")
		for _, e := range s.Examples[:n] {
			b.WriteString("\n- " + toolshape.Clip(oneLine(e), maxExampleBytes))
		}
	}
	if len(s.InputModes) > 0 {
		b.WriteString("\n\nAccepts: " + toolshape.Clip(strings.Join(s.InputModes, ", "), maxExampleBytes))
	}
	if len(s.OutputModes) > 0 {
		b.WriteString("\nAnswers: " + toolshape.Clip(strings.Join(s.OutputModes, ", "), maxExampleBytes))
	}
	b.WriteString("\n\nAn A2A skill: call it with {text} and/or {data}, sent as one message.")
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// call sends one message for skill and follows the task it opens until it ends or the call's
// time does (conn.bounded). A failure before any request byte left (the peer refused the
// connection) is a notSentError; nothing is ever sent twice. After a failure in transport the
// card is read again at the next turn, since the peer may have changed.
func (p *peer) call(ctx context.Context, skill string, args json.RawMessage) (*mcp.CallToolResult, error) {
	if p.c.pool.isClosed() {
		return nil, &notSentError{errPoolClosed}
	}
	return p.c.bounded(ctx, func(ctx context.Context) (*mcp.CallToolResult, error) {
		return p.send(ctx, skill, args)
	}, func(error) { p.c.outdated() })
}

// send sends one message/send for skill and follows the task it opens until it ends or ctx
// does.
func (p *peer) send(ctx context.Context, skill string, args json.RawMessage) (*mcp.CallToolResult, error) {
	var in struct {
		Text *string        `json:"text"`
		Data map[string]any `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	dec.UseNumber() // the peer gets the program's numbers as written
	if err := dec.Decode(&in); err != nil {
		return nil, &notSentError{fmt.Errorf("the arguments of an A2A skill are {text, data}: %w", err)}
	}
	d := p.dialect()
	params := d.sendParams(skill, in.Text, in.Data)
	budget := 2 * int64(p.srv.maxFrame()) // every answer of one call, polls included
	// The send outlives the call by cancelGrace: a call ended while its message is on the way
	// still learns the task's id, so follow can cancel the task rather than leave it running.
	sendCtx, stop := withGrace(ctx, cancelGrace)
	defer stop()
	raw, err := p.rpc(sendCtx, d, "message/send", params, &budget, true)
	if err != nil && ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if err != nil {
		return p.answerError(err)
	}
	ev, err := d.sendAnswer(raw)
	if err != nil {
		return nil, err
	}
	switch ev := ev.(type) {
	case *a2a.Message:
		return partsResult(ev.Parts)
	case *a2a.Task:
		return p.follow(ctx, d, ev, &budget)
	}
	return nil, fmt.Errorf("%s answered a %T", d.method("message/send"), ev)
}

// withGrace returns a context carrying ctx's values that ends grace after ctx does, or when
// its stop is called.
func withGrace(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	g, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var timer *time.Timer
	var mu sync.Mutex
	after := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(grace, cancel)
	})
	return g, func() {
		after()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// follow polls tasks/get until task ends, waiting longer each time up to pollMax. When ctx
// ends first, the task is cancelled on the peer (best effort) and the cause returned.
func (p *peer) follow(ctx context.Context, d dialect, task *a2a.Task, budget *int64) (*mcp.CallToolResult, error) {
	wait := pollFirst
	for open(task.Status.State) {
		if task.ID == "" {
			return nil, errors.New("the peer answered an open task without an id")
		}
		select {
		case <-ctx.Done():
			p.cancelTask(d, task.ID)
			return nil, context.Cause(ctx)
		case <-time.After(wait):
		}
		wait = min(2*wait, pollMax)
		raw, err := p.rpc(ctx, d, "tasks/get", d.getParams(task.ID), budget, false)
		if err != nil {
			if ctx.Err() != nil {
				p.cancelTask(d, task.ID)
				return nil, context.Cause(ctx)
			}
			return p.answerError(err)
		}
		if task, err = d.taskAnswer(raw); err != nil {
			return nil, err
		}
	}
	return p.taskResult(d, task)
}

// open reports whether a task in state s is still running, so worth polling.
func open(s a2a.TaskState) bool {
	return s == a2a.TaskStateSubmitted || s == a2a.TaskStateWorking
}

// taskResult turns an ended (or interrupted) task into a result: a completed task's artifacts
// (or, with none, its final status message); any other state is the tool's error, with the
// peer's status text.
func (p *peer) taskResult(d dialect, task *a2a.Task) (*mcp.CallToolResult, error) {
	st := task.Status
	if st.State == a2a.TaskStateCompleted {
		var parts a2a.ContentParts
		for _, a := range task.Artifacts {
			if a != nil {
				parts = append(parts, a.Parts...)
			}
		}
		if len(parts) == 0 && st.Message != nil {
			parts = st.Message.Parts
		}
		return partsResult(parts)
	}
	why := ""
	if st.Message != nil {
		why = partsText(st.Message.Parts)
	}
	var text string
	switch st.State {
	case a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
		// A binding call is one message; it cannot answer. The task is let go of.
		p.cancelTask(d, task.ID)
		text = fmt.Sprintf("the agent asked for more (%s), which a binding call cannot give: it sends one message", stateText(st.State))
	default:
		text = fmt.Sprintf("the agent's task ended %s", stateText(st.State))
	}
	if why != "" {
		text += ": " + why
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
}

// cancelTask asks the peer to cancel task id, best effort and bounded, on a context of its
// own since the call's has usually ended.
func (p *peer) cancelTask(d dialect, id a2a.TaskID) {
	if id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	budget := int64(p.srv.maxFrame())
	params := d.cancelParams(id)
	if _, err := p.rpc(ctx, d, "tasks/cancel", params, &budget, false); err != nil {
		p.logger.Info("a2a tasks/cancel failed", "server", p.srv.Name, "err", redactErr(err))
	}
}

// rpcError is the peer's own JSON-RPC error answer.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("A2A error %d: %s", e.Code, e.Message) }

// answerError turns the peer's JSON-RPC error answer into the tool's error, except the codes
// that say the two sides do not speak the same protocol (parse error, invalid request, method
// not found, and 1.0's version not supported), which are the upstream's failure like any other.
func (p *peer) answerError(err error) (*mcp.CallToolResult, error) {
	var re *rpcError
	if !errors.As(err, &re) || re.Code == -32700 || re.Code == -32600 || re.Code == -32601 || re.Code == -32009 {
		return nil, err
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: toolshape.Clip(re.Error(), 2000)}}}, nil
}

// rpc makes one JSON-RPC request to the endpoint and returns its result. Each answer is
// bounded by the frame limit and all of one call's answers by *budget. first marks the
// request a call opens with: only there does a refused connection mean nothing was sent.
func (p *peer) rpc(ctx context.Context, d dialect, op string, params any, budget *int64, first bool) (json.RawMessage, error) {
	method := d.method(op)
	id := p.ids.Add(1)
	body, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int64  `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", id, method, params})
	if err != nil {
		return nil, &notSentError{err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, &notSentError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("A2A-Version", d.version)
	telemetry.ToHeader(ctx, req.Header) // the upstream call's span, as W3C Trace Context headers
	limit := min(int64(p.srv.maxFrame()), *budget)
	data, err := p.do(req, limit)
	if err != nil {
		var op *net.OpError
		if first && errors.As(err, &op) && op.Op == "dial" {
			return nil, &notSentError{err}
		}
		return nil, err
	}
	*budget -= int64(len(data))
	var resp struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *rpcError       `json:"error"`
	}
	if err := json.Unmarshal(data, &resp); err != nil || resp.JSONRPC != "2.0" {
		return nil, fmt.Errorf("%s: the answer is not JSON-RPC 2.0", method)
	}
	if string(resp.ID) != fmt.Sprint(id) {
		return nil, fmt.Errorf("%s: the answer is for another request", method)
	}
	if resp.Error != nil {
		resp.Error.Message = oneLine(toolshape.Clip(resp.Error.Message, 2000))
		return nil, resp.Error
	}
	if len(resp.Result) == 0 {
		return nil, fmt.Errorf("%s: the answer has neither result nor error", method)
	}
	return resp.Result, nil
}

// do sends req and returns a 200 JSON body of at most limit bytes, read as it arrives.
func (p *peer) do(req *http.Request, limit int64) ([]byte, error) {
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP status %d", resp.StatusCode)
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" && ct != "application/a2a+json" {
		return nil, fmt.Errorf("the answer is %q, not application/json", toolshape.Clip(ct, 64))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", errResponseTooLarge, limit)
	}
	return data, nil
}

// partsResult renders an answer's parts as an MCP result, so a program receives it as it
// receives any tool's: one text part is its text; one data part is its value; several parts
// are a list of blocks (MCP content blocks for text and files, {"type": "data", "data": …}
// for data). A data value that is not an object is {"value": it}, since MCP's structured
// content is an object. Files with bytes become image, audio or embedded-resource blocks,
// files by URL resource links.
func partsResult(parts a2a.ContentParts) (*mcp.CallToolResult, error) {
	res := &mcp.CallToolResult{Content: []mcp.Content{}}
	var values []any
	var data []any
	for _, part := range parts {
		if part == nil {
			return nil, errors.New("an answer part that is null")
		}
		switch c := part.Content.(type) {
		case a2a.Text:
			t := &mcp.TextContent{Text: string(c)}
			res.Content, values = append(res.Content, t), append(values, t)
		case a2a.Data:
			v := dataObject(c.Value)
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			data = append(data, v)
			res.Content = append(res.Content, &mcp.TextContent{Text: string(b)})
			values = append(values, dataBlock{Type: "data", Data: b})
		case a2a.Raw, a2a.URL:
			f, err := fileContent(part)
			if err != nil {
				return nil, err
			}
			res.Content, values = append(res.Content, f), append(values, f)
		default:
			return nil, fmt.Errorf("an answer part of type %T", part.Content)
		}
	}
	switch {
	case len(parts) == 1 && len(data) == 1:
		res.StructuredContent = data[0]
	case len(data) > 0:
		b, err := json.Marshal(values)
		if err != nil {
			return nil, err
		}
		res.StructuredContent = json.RawMessage(b)
	}
	return res, nil
}

// dataObject is a data part's value as an object: itself, or {"value": it}.
func dataObject(v any) any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{"value": v}
}

// dataBlock is a data part among several, as a program receives it.
type dataBlock struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

func fileContent(part *a2a.Part) (mcp.Content, error) {
	switch c := part.Content.(type) {
	case a2a.URL:
		name := part.Filename
		if name == "" {
			name = string(c)
		}
		return &mcp.ResourceLink{URI: string(c), Name: name, MIMEType: part.MediaType}, nil
	case a2a.Raw:
		switch {
		case strings.HasPrefix(part.MediaType, "image/"):
			return &mcp.ImageContent{Data: c, MIMEType: part.MediaType}, nil
		case strings.HasPrefix(part.MediaType, "audio/"):
			return &mcp.AudioContent{Data: c, MIMEType: part.MediaType}, nil
		}
		name := part.Filename
		if name == "" {
			name = "file"
		}
		return &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "a2a:file/" + url.PathEscape(name), MIMEType: part.MediaType, Blob: c,
		}}, nil
	}
	return nil, fmt.Errorf("a file part of type %T", part.Content)
}

// partsText joins the text parts, for an error's message.
func partsText(parts a2a.ContentParts) string {
	var out []string
	for _, part := range parts {
		if t, ok := part.Content.(a2a.Text); ok {
			out = append(out, string(t))
		}
	}
	return toolshape.Clip(strings.Join(out, "\n"), 2000)
}
