package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
)

// A2A 1.0's JSON-RPC binding, written from the specification (and checked against the
// official JS SDK) since no Go library for it is reachable from this module's proxy:
// a2a-go v0.3 speaks 0.3 only, and its v2 module is not published there. Its shapes are
// protobuf JSON: camelCase keys, enums as SCREAMING_CASE strings (numbers accepted too), a
// Part as one of text, raw, url or data, and answers that wrap a task or a message in an
// object naming which. What comes back is turned into a2a-go's 0.3 types at once, so
// everything after the decoding (polling, results, errors) is one code for both versions.
//
// Unknown keys are ignored, as on the 0.3 side: a minor version of A2A adds fields. What is
// read is checked: a part must carry exactly one content, a state must be one A2A names, an
// answer must be a task or a message.

// Protocol versions, as a card's interfaces and the A2A-Version header name them.
const (
	a2aV03 = "0.3"
	a2aV10 = "1.0"
)

// v1Methods maps the operations this client uses to each version's JSON-RPC method names.
var v1Methods = map[string]string{"message/send": "SendMessage", "tasks/get": "GetTask", "tasks/cancel": "CancelTask"}

// v1Card is what is read of a 1.0 card (or of a 0.3 card that embeds its 1.0 interfaces).
type v1Card struct {
	SupportedInterfaces []v1Interface `json:"supportedInterfaces"`
	Skills              []v1Skill     `json:"skills"`
}

type v1Interface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
	Tenant          string `json:"tenant"`
}

type v1Skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Examples    []string `json:"examples"`
	InputModes  []string `json:"inputModes"`
	OutputModes []string `json:"outputModes"`
}

func (s v1Skill) v03() a2a.AgentSkill {
	return a2a.AgentSkill{ID: s.ID, Name: s.Name, Description: s.Description,
		Examples: s.Examples, InputModes: s.InputModes, OutputModes: s.OutputModes}
}

// majorOf is the major version a protocolVersion names ("1.0", "1.0.0", "1"; "0.3.0" is 0),
// or -1 when it names none. An empty one is 0.3, as the JS SDK reads it.
func majorOf(v string) int {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	major, rest, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	if err != nil || n < 0 || (n == 0 && !strings.HasPrefix(rest, "3")) {
		return -1
	}
	return n
}

// pickInterface chooses the JSON-RPC interface to speak: 1.x before 0.3, the first listed
// within one version. ok is false when the card lists no JSON-RPC interface of either.
func pickInterface(ifs []v1Interface) (in v1Interface, version string, ok bool) {
	for _, want := range []int{1, 0} {
		for _, in := range ifs {
			if !strings.EqualFold(in.ProtocolBinding, string(a2a.TransportProtocolJSONRPC)) || majorOf(in.ProtocolVersion) != want {
				continue
			}
			if want == 1 {
				return in, a2aV10, true
			}
			return in, a2aV03, true
		}
	}
	return v1Interface{}, "", false
}

// v1Send is SendMessage's params: one user message, answered at once (returnImmediately),
// with no history.
type v1Send struct {
	Tenant        string    `json:"tenant,omitempty"`
	Message       v1Message `json:"message"`
	Configuration struct {
		ReturnImmediately bool `json:"returnImmediately"`
		HistoryLength     int  `json:"historyLength"`
	} `json:"configuration"`
}

// v1TaskParams is GetTask's and CancelTask's params.
type v1TaskParams struct {
	Tenant        string `json:"tenant,omitempty"`
	ID            string `json:"id"`
	HistoryLength *int   `json:"historyLength,omitempty"`
}

type v1Message struct {
	MessageID string         `json:"messageId"`
	ContextID string         `json:"contextId,omitempty"`
	TaskID    string         `json:"taskId,omitempty"`
	Role      string         `json:"role"`
	Parts     []v1Part       `json:"parts"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type v1Part struct {
	Text      *string         `json:"text,omitempty"`
	Raw       *string         `json:"raw,omitempty"` // base64
	URL       *string         `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
}

type v1Task struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    *struct {
		State   json.RawMessage `json:"state"`
		Message *v1Message      `json:"message"`
	} `json:"status"`
	Artifacts []struct {
		Parts []v1Part `json:"parts"`
	} `json:"artifacts"`
}

// v1Answer is SendMessage's result: a task or a message, named.
type v1Answer struct {
	Task    *v1Task    `json:"task"`
	Message *v1Message `json:"message"`
}

// v1Request turns the message call built as 0.3 into 1.0's SendMessage params.
func v1Request(msg *a2a.Message, tenant string) (v1Send, error) {
	out := v1Send{Tenant: tenant, Message: v1Message{MessageID: msg.ID, Role: "ROLE_USER", Metadata: msg.Metadata}}
	out.Configuration.ReturnImmediately = true
	for _, p := range msg.Parts {
		switch p := p.(type) {
		case a2a.TextPart:
			out.Message.Parts = append(out.Message.Parts, v1Part{Text: &p.Text})
		case a2a.DataPart:
			b, err := json.Marshal(p.Data)
			if err != nil {
				return v1Send{}, err
			}
			out.Message.Parts = append(out.Message.Parts, v1Part{Data: b})
		default:
			return v1Send{}, fmt.Errorf("a message part of type %T", p)
		}
	}
	return out, nil
}

// decodeV1Answer reads SendMessage's result as a 0.3 task or message.
func decodeV1Answer(raw json.RawMessage) (a2a.Event, error) {
	var a v1Answer
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("SendMessage answered no JSON of A2A 1.0: %s", clip(err.Error(), 300))
	}
	switch {
	case a.Task != nil && a.Message == nil:
		return a.Task.v03()
	case a.Message != nil && a.Task == nil:
		return a.Message.v03()
	}
	return nil, errors.New("SendMessage answered neither a task nor a message")
}

// decodeV1Task reads GetTask's (or CancelTask's) result as a 0.3 task.
func decodeV1Task(raw json.RawMessage) (*a2a.Task, error) {
	var t v1Task
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("GetTask answered no task of A2A 1.0: %s", clip(err.Error(), 300))
	}
	return t.v03()
}

// v1States are the task states in 1.0's enum order (protobuf JSON may send the number).
var v1States = []a2a.TaskState{
	a2a.TaskStateUnspecified, a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateCompleted,
	a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateInputRequired, a2a.TaskStateRejected,
	a2a.TaskStateAuthRequired,
}

func v1State(raw json.RawMessage) (a2a.TaskState, error) {
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		if n > 0 && n < len(v1States) {
			return v1States[n], nil
		}
		return "", fmt.Errorf("a task state %d A2A 1.0 does not name", n)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || !strings.HasPrefix(s, "TASK_STATE_") {
		return "", fmt.Errorf("a task state %s A2A 1.0 does not name", clip(string(raw), 64))
	}
	st := a2a.TaskState(strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s, "TASK_STATE_")), "_", "-"))
	for _, known := range v1States[1:] {
		if st == known {
			return st, nil
		}
	}
	return "", fmt.Errorf("a task state %q A2A 1.0 does not name", clip(s, 64))
}

func (t *v1Task) v03() (*a2a.Task, error) {
	if t.Status == nil || len(t.Status.State) == 0 {
		return nil, errors.New("the peer answered a task without a state")
	}
	state, err := v1State(t.Status.State)
	if err != nil {
		return nil, err
	}
	out := &a2a.Task{ID: a2a.TaskID(t.ID), ContextID: t.ContextID, Status: a2a.TaskStatus{State: state}}
	if t.Status.Message != nil {
		if out.Status.Message, err = t.Status.Message.v03(); err != nil {
			return nil, err
		}
	}
	for _, a := range t.Artifacts {
		parts, err := v1Parts(a.Parts)
		if err != nil {
			return nil, err
		}
		out.Artifacts = append(out.Artifacts, &a2a.Artifact{Parts: parts})
	}
	return out, nil
}

func (m *v1Message) v03() (*a2a.Message, error) {
	parts, err := v1Parts(m.Parts)
	if err != nil {
		return nil, err
	}
	return &a2a.Message{ID: m.MessageID, ContextID: m.ContextID, TaskID: a2a.TaskID(m.TaskID), Role: a2a.MessageRoleAgent, Parts: parts}, nil
}

// v1Parts turns 1.0 parts into 0.3 ones: text as text, data as data (a value that is not an
// object as {"value": it}, since a 0.3 data part and an MCP structured result are objects),
// raw bytes as a file with bytes, a url as a file by URI.
func v1Parts(in []v1Part) ([]a2a.Part, error) {
	out := make([]a2a.Part, 0, len(in))
	for _, p := range in {
		hasData := len(p.Data) > 0 && string(p.Data) != "null"
		n := 0
		for _, set := range []bool{p.Text != nil, p.Raw != nil, p.URL != nil, hasData} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("an answer part with %d of text, raw, url and data; A2A 1.0 asks for exactly one", n)
		}
		meta := a2a.FileMeta{MimeType: p.MediaType, Name: p.Filename}
		switch {
		case p.Text != nil:
			out = append(out, a2a.TextPart{Text: *p.Text})
		case p.Raw != nil:
			b, err := decodeBase64(*p.Raw)
			if err != nil {
				return nil, errors.New("a raw part's bytes are not base64")
			}
			out = append(out, a2a.FilePart{File: a2a.FileBytes{FileMeta: meta, Bytes: base64.StdEncoding.EncodeToString(b)}})
		case p.URL != nil:
			out = append(out, a2a.FilePart{File: a2a.FileURI{FileMeta: meta, URI: *p.URL}})
		default:
			dec := json.NewDecoder(bytes.NewReader(p.Data))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				return nil, err
			}
			obj, ok := v.(map[string]any)
			if !ok {
				obj = map[string]any{"value": v}
			}
			out = append(out, a2a.DataPart{Data: obj})
		}
	}
	return out, nil
}

// decodeBase64 reads bytes as protobuf JSON writes them: standard or URL-safe, padded or not.
func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}
