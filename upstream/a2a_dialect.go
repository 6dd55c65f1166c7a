package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
)

// The two versions of A2A a peer is spoken to in, each from a2a-go (docs/design.md §13.7).
// 1.0 is a2a-go/v2's: a request is its Go model (package a2a) in the JSON its JSON-RPC binding
// sends, and an answer is read as its protobuf messages (a2apb) by the protobuf JSON rules the
// 1.0 binding is defined by (enums by name or by number, bytes in either base64 alphabet),
// then turned into the Go model. 0.3 is a2a-go v0.3's types (a2a03), its answers turned into
// 1.0's model too. So polling, results and failures are one code for both versions. Unknown
// keys are ignored on both sides (a minor version adds fields); what is read is checked: a
// part carries exactly one content, a state is one A2A names, an answer is a task or a message.

// Protocol versions, as a card's interfaces and the A2A-Version header name them.
const (
	a2aV03 = "0.3"
	a2aV10 = string(a2a.Version)
)

// dialect is what the card decides for the calls that follow it: the JSON-RPC endpoint, the
// protocol version spoken there (a2aV03 or a2aV10) and, on 1.0, the interface's tenant. A
// call takes it once, so its requests all speak the same.
type dialect struct {
	endpoint, version, tenant string
}

// v10Methods are the 1.0 JSON-RPC method names of the operations this client uses, by their
// 0.3 names: 1.0's are the A2AService's RPC names.
var v10Methods = map[string]string{
	"message/send": path.Base(a2apb.A2AService_SendMessage_FullMethodName),
	"tasks/get":    path.Base(a2apb.A2AService_GetTask_FullMethodName),
	"tasks/cancel": path.Base(a2apb.A2AService_CancelTask_FullMethodName),
}

// method is op (a 0.3 method name) as this dialect names it.
func (d dialect) method(op string) string {
	if d.version == a2aV10 {
		return v10Methods[op]
	}
	return op
}

// sendParams are message/send's params: one user message of a text part, a data part or
// both, its metadata naming the skill, answered at once (not blocking) with no history.
func (d dialect) sendParams(skill string, text *string, data map[string]any) any {
	meta := map[string]any{SkillMetaKey: skill}
	history := 0
	if d.version == a2aV10 {
		var parts []*a2a.Part
		if text != nil {
			parts = append(parts, a2a.NewTextPart(*text))
		}
		if data != nil {
			parts = append(parts, a2a.NewDataPart(data))
		}
		msg := a2a.NewMessage(a2a.MessageRoleUser, parts...)
		msg.Metadata = meta
		return &a2a.SendMessageRequest{Tenant: d.tenant, Message: msg,
			Config: &a2a.SendMessageConfig{ReturnImmediately: true, HistoryLength: &history}}
	}
	var parts []a2a03.Part
	if text != nil {
		parts = append(parts, a2a03.TextPart{Text: *text})
	}
	if data != nil {
		parts = append(parts, a2a03.DataPart{Data: data})
	}
	msg := a2a03.NewMessage(a2a03.MessageRoleUser, parts...)
	msg.Metadata = meta
	blocking := false
	return a2a03.MessageSendParams{Message: msg, Config: &a2a03.MessageSendConfig{Blocking: &blocking, HistoryLength: &history}}
}

// getParams are tasks/get's params for task id, without its history.
func (d dialect) getParams(id a2a.TaskID) any {
	if d.version == a2aV10 {
		return &a2a.GetTaskRequest{Tenant: d.tenant, ID: id, HistoryLength: new(int)}
	}
	return a2a03.TaskQueryParams{ID: a2a03.TaskID(id), HistoryLength: new(int)}
}

// cancelParams are tasks/cancel's params for task id.
func (d dialect) cancelParams(id a2a.TaskID) any {
	if d.version == a2aV10 {
		return &a2a.CancelTaskRequest{Tenant: d.tenant, ID: id}
	}
	return a2a03.TaskIDParams{ID: a2a03.TaskID(id)}
}

// protoJSON reads 1.0's answers: a minor version's new keys are ignored.
var protoJSON = protojson.UnmarshalOptions{DiscardUnknown: true}

// sendAnswer reads message/send's result: a task or a message.
func (d dialect) sendAnswer(raw json.RawMessage) (a2a.SendMessageResult, error) {
	if d.version == a2aV10 {
		var r a2apb.SendMessageResponse
		if err := protoJSON.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("SendMessage answered no JSON of A2A 1.0: %s", toolshape.Clip(err.Error(), 300))
		}
		switch r := r.GetPayload().(type) {
		case *a2apb.SendMessageResponse_Task:
			return fromV10Task(r.Task)
		case *a2apb.SendMessageResponse_Message:
			return fromV10Message(r.Message)
		}
		return nil, errors.New("SendMessage answered neither a task nor a message")
	}
	ev, err := a2a03.UnmarshalEventJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("message/send answered neither a task nor a message: %s", toolshape.Clip(err.Error(), 300))
	}
	switch ev := ev.(type) {
	case *a2a03.Task:
		return fromV03Task(ev)
	case *a2a03.Message:
		return fromV03Message(ev)
	}
	return nil, fmt.Errorf("message/send answered a %T", ev)
}

// taskAnswer reads tasks/get's result: a task.
func (d dialect) taskAnswer(raw json.RawMessage) (*a2a.Task, error) {
	if d.version == a2aV10 {
		var t a2apb.Task
		if err := protoJSON.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("GetTask answered no task of A2A 1.0: %s", toolshape.Clip(err.Error(), 300))
		}
		return fromV10Task(&t)
	}
	var t a2a03.Task
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("tasks/get answered no task: %s", toolshape.Clip(err.Error(), 300))
	}
	return fromV03Task(&t)
}

// fromV10Task reads what is used of a 1.0 task: its id, state, status message and artifacts.
func fromV10Task(t *a2apb.Task) (*a2a.Task, error) {
	st := t.GetStatus()
	if st.GetState() == a2apb.TaskState_TASK_STATE_UNSPECIFIED {
		return nil, errors.New("the peer answered a task without a state")
	}
	name, ok := a2apb.TaskState_name[int32(st.GetState())]
	if !ok {
		return nil, fmt.Errorf("a task state %d A2A 1.0 does not name", st.GetState())
	}
	out := &a2a.Task{ID: a2a.TaskID(t.GetId()), ContextID: t.GetContextId(), Status: a2a.TaskStatus{State: a2a.TaskState(name)}}
	if m := st.GetMessage(); m != nil {
		msg, err := fromV10Message(m)
		if err != nil {
			return nil, err
		}
		out.Status.Message = msg
	}
	for _, a := range t.GetArtifacts() {
		parts, err := fromV10Parts(a.GetParts())
		if err != nil {
			return nil, err
		}
		out.Artifacts = append(out.Artifacts, &a2a.Artifact{Parts: parts})
	}
	return out, nil
}

func fromV10Message(m *a2apb.Message) (*a2a.Message, error) {
	parts, err := fromV10Parts(m.GetParts())
	if err != nil {
		return nil, err
	}
	return &a2a.Message{ID: m.GetMessageId(), ContextID: m.GetContextId(), TaskID: a2a.TaskID(m.GetTaskId()), Role: a2a.MessageRoleAgent, Parts: parts}, nil
}

// fromV10Parts reads 1.0 parts: text, raw bytes, a url or a data value (of any JSON type;
// partsResult makes one that is not an object {"value": it}).
func fromV10Parts(in []*a2apb.Part) (a2a.ContentParts, error) {
	out := make(a2a.ContentParts, 0, len(in))
	for _, p := range in {
		part := &a2a.Part{Filename: p.GetFilename(), MediaType: p.GetMediaType()}
		switch c := p.GetContent().(type) {
		case *a2apb.Part_Text:
			part.Content = a2a.Text(c.Text)
		case *a2apb.Part_Raw:
			part.Content = a2a.Raw(c.Raw)
		case *a2apb.Part_Url:
			part.Content = a2a.URL(c.Url)
		case *a2apb.Part_Data:
			part.Content = a2a.Data{Value: c.Data.AsInterface()}
		default:
			return nil, errors.New("an answer part with none of text, raw, url and data; A2A 1.0 asks for exactly one")
		}
		out = append(out, part)
	}
	return out, nil
}

// v03States are 0.3's task states as 1.0 names them; a state 0.3 does not name is kept as sent.
var v03States = map[a2a03.TaskState]a2a.TaskState{
	a2a03.TaskStateSubmitted: a2a.TaskStateSubmitted, a2a03.TaskStateWorking: a2a.TaskStateWorking,
	a2a03.TaskStateCompleted: a2a.TaskStateCompleted, a2a03.TaskStateFailed: a2a.TaskStateFailed,
	a2a03.TaskStateCanceled: a2a.TaskStateCanceled, a2a03.TaskStateInputRequired: a2a.TaskStateInputRequired,
	a2a03.TaskStateRejected: a2a.TaskStateRejected, a2a03.TaskStateAuthRequired: a2a.TaskStateAuthRequired,
}

// fromV03Task reads what is used of a 0.3 task, as fromV10Task does.
func fromV03Task(t *a2a03.Task) (*a2a.Task, error) {
	state, ok := v03States[t.Status.State]
	if !ok {
		state = a2a.TaskState(t.Status.State)
	}
	out := &a2a.Task{ID: a2a.TaskID(t.ID), ContextID: t.ContextID, Status: a2a.TaskStatus{State: state}}
	if t.Status.Message != nil {
		msg, err := fromV03Message(t.Status.Message)
		if err != nil {
			return nil, err
		}
		out.Status.Message = msg
	}
	for _, a := range t.Artifacts {
		if a == nil {
			continue
		}
		parts, err := fromV03Parts(a.Parts)
		if err != nil {
			return nil, err
		}
		out.Artifacts = append(out.Artifacts, &a2a.Artifact{Parts: parts})
	}
	return out, nil
}

func fromV03Message(m *a2a03.Message) (*a2a.Message, error) {
	parts, err := fromV03Parts(m.Parts)
	if err != nil {
		return nil, err
	}
	return &a2a.Message{ID: m.ID, ContextID: m.ContextID, TaskID: a2a.TaskID(m.TaskID), Role: a2a.MessageRoleAgent, Parts: parts}, nil
}

// fromV03Parts reads 0.3 parts as 1.0's: a file with bytes as raw bytes, a file by URI as a url,
// the file's name and MIME type as the part's.
func fromV03Parts(in []a2a03.Part) (a2a.ContentParts, error) {
	out := make(a2a.ContentParts, 0, len(in))
	for _, p := range in {
		switch p := p.(type) {
		case a2a03.TextPart:
			out = append(out, a2a.NewTextPart(p.Text))
		case a2a03.DataPart:
			out = append(out, a2a.NewDataPart(p.Data))
		case a2a03.FilePart:
			switch f := p.File.(type) {
			case a2a03.FileURI:
				out = append(out, &a2a.Part{Content: a2a.URL(f.URI), Filename: f.Name, MediaType: f.MimeType})
			case a2a03.FileBytes:
				b, err := base64.StdEncoding.DecodeString(f.Bytes)
				if err != nil {
					return nil, errors.New("a file part's bytes are not base64")
				}
				out = append(out, &a2a.Part{Content: a2a.Raw(b), Filename: f.Name, MediaType: f.MimeType})
			default:
				return nil, fmt.Errorf("a file part of type %T", p.File)
			}
		default:
			return nil, fmt.Errorf("an answer part of type %T", p)
		}
	}
	return out, nil
}

// stateText names a task state as a message says it: 0.3's spelling ("input-required"),
// which 1.0's names ("TASK_STATE_INPUT_REQUIRED") are written in too.
func stateText(s a2a.TaskState) string {
	if rest, ok := strings.CutPrefix(string(s), "TASK_STATE_"); ok {
		return strings.ReplaceAll(strings.ToLower(rest), "_", "-")
	}
	return toolshape.Clip(string(s), 32)
}

// card is what is read of a card listing supportedInterfaces (1.0's, or 0.3's that embeds its
// 1.0 interfaces as the JS SDK's legacy layer serves): the interfaces and the skills.
type card struct {
	SupportedInterfaces []*a2a.AgentInterface `json:"supportedInterfaces"`
	Skills              []a2a.AgentSkill      `json:"skills"`
}

// hasInterfaces reports whether the card body lists supportedInterfaces.
func hasInterfaces(body []byte) (bool, error) {
	var probe struct {
		SupportedInterfaces json.RawMessage `json:"supportedInterfaces"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return false, fmt.Errorf("the agent card is not a JSON object: %s", toolshape.Clip(err.Error(), 300))
	}
	s := bytes.TrimSpace(probe.SupportedInterfaces)
	return len(s) > 0 && !bytes.Equal(s, []byte("null")) && !bytes.Equal(s, []byte("[]")), nil
}

// majorOf is the major version a protocolVersion names ("1.0", "1.0.0", "1"; "0.3.0" is 0),
// or -1 when it names none. An empty one is 0.3, as the JS SDK reads it.
func majorOf(v a2a.ProtocolVersion) int {
	s := strings.TrimSpace(string(v))
	if s == "" {
		return 0
	}
	major, rest, _ := strings.Cut(s, ".")
	n, err := strconv.Atoi(major)
	if err != nil || n < 0 || (n == 0 && !strings.HasPrefix(rest, "3")) {
		return -1
	}
	return n
}

// pickInterface chooses the JSON-RPC interface to speak: 1.x before 0.3, the first listed
// within one version. ok is false when the card lists no JSON-RPC interface of either.
func pickInterface(ifs []*a2a.AgentInterface) (in *a2a.AgentInterface, version string, ok bool) {
	for _, want := range []int{1, 0} {
		for _, in := range ifs {
			if in == nil || !strings.EqualFold(string(in.ProtocolBinding), string(a2a.TransportProtocolJSONRPC)) || majorOf(in.ProtocolVersion) != want {
				continue
			}
			if want == 1 {
				return in, a2aV10, true
			}
			return in, a2aV03, true
		}
	}
	return nil, "", false
}
