package remote

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
)

// Version is the protocol version: the /v2 of every route, and the "protocol" field of a
// describe answer and of a start request. Anything that changes a route, a frame or the
// result's shape is a new version. 2: the result frame carries an engine.Outcome under
// "outcome", and a call's answer is a wire.Result (with its "type").
const Version = 2

// The routes. An execution's own routes are PathExecutions + "/{id}/results" and
// PathExecutions + "/{id}/cancel".
const (
	PathDescribe   = "/v2/describe"
	PathExecutions = "/v2/executions"
	PathHealth     = "/healthz"
	PathReady      = "/readyz"
)

// ContentType is the media type of an execution's frame stream.
const ContentType = "application/x-ndjson"

func resultsPath(id string) string { return PathExecutions + "/" + id + "/results" }
func cancelPath(id string) string  { return PathExecutions + "/" + id + "/cancel" }

// Frame types of the stream, service to client (call and read are wire.TypeCall and
// wire.TypeRead).
const (
	FrameAccepted = "accepted"
	FrameError    = "error"
	FrameProgress = "progress"
	FrameData     = "data"
	FrameResult   = "result"
)

// DescribeAnswer is the body of GET /v2/describe.
type DescribeAnswer struct {
	Protocol int `json:"protocol"`
	// AllowNetwork: the service's profile may grant an execution network access.
	AllowNetwork bool               `json:"allow_network"`
	Description  engine.Description `json:"description"`
}

// StartRequest is the body of POST /v2/executions.
type StartRequest struct {
	Protocol int          `json:"protocol"`
	Program  string       `json:"program"`
	Terms    engine.Terms `json:"terms"`
	// Tools are the names the program may call (TOOLS).
	Tools []string `json:"tools"`
	// Aliases are the names of Tools bound as Python names too: the caller computes them once
	// (engine.Execution.Aliases) and the service passes them on as they are.
	Aliases []string `json:"aliases"`
	// Signatures are engine.Execution.Signatures, passed on as they are.
	Signatures json.RawMessage `json:"signatures,omitempty"`
	// Calls: the caller answers binding calls. When false the service answers every call
	// unavailable itself and sends no call or read frame.
	Calls bool `json:"calls"`
}

// Accepted is the first frame of a stream that will run the program: the execution's id, the
// {id} of its results and cancel routes.
type Accepted struct {
	Type      string `json:"type"`
	Execution string `json:"execution"`
}

// ErrorFrame, as the first and only frame of a stream, says the service will not run the
// program: a refusal kind (isolation_unavailable, network_unavailable, backend_unavailable)
// for terms it cannot meet, or provider_error. Nothing ran.
type ErrorFrame struct {
	Type    string `json:"type"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// Progress is the heartbeat, about once a second while the program runs.
type Progress struct {
	Type           string  `json:"type"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
}

// ResultFrame ends a stream that was accepted: what the sandbox saw of the execution, whose
// captured bytes (stdout, stderr, artifacts) came before it in data frames. The call and read
// frames of a stream, and the body a caller posts to answer one, are package wire's Call,
// Read and Result: one frame set on both boundaries.
type ResultFrame struct {
	Type      string         `json:"type"`
	Execution string         `json:"execution"`
	Outcome   engine.Outcome `json:"outcome"`
}

// ErrorBody is the JSON body of every answer other than 200 and 204.
type ErrorBody struct {
	Error struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
}

// Data frames are written in exactly this form, key order included and without whitespace,
// so that a reader decodes the base64 in place: dataPrefix, the stream name, dataMiddle, the
// standard base64 of the bytes, dataSuffix. Any other form is a malformed frame.
const (
	dataPrefix = `{"type":"data","stream":"`
	dataMiddle = `","data":"`
	dataSuffix = `"}`
	// DataChunk is how many bytes one data frame carries at most.
	DataChunk = 192 << 10
	// MaxArtifacts bounds the artifact index a data frame may name.
	MaxArtifacts = 4096
)

// AppendData appends the data frame carrying b for stream, with its newline, to dst.
func AppendData(dst []byte, stream string, b []byte) []byte {
	dst = append(dst, dataPrefix...)
	dst = append(dst, stream...)
	dst = append(dst, dataMiddle...)
	dst = base64.StdEncoding.AppendEncode(dst, b)
	dst = append(dst, dataSuffix...)
	return append(dst, '\n')
}

// parseData splits a data frame into its stream name and its base64 text (both aliasing
// line). ok is false when line is not a data frame at all; err is set when it starts like
// one but breaks the form.
func parseData(line []byte) (stream string, b64 []byte, ok bool, err error) {
	rest, found := bytes.CutPrefix(line, []byte(dataPrefix))
	if !found {
		return "", nil, false, nil
	}
	name, rest, found := bytes.Cut(rest, []byte(dataMiddle))
	if !found || len(name) > 16 {
		return "", nil, true, errors.New("a data frame is not in its fixed form")
	}
	b64, found = bytes.CutSuffix(rest, []byte(dataSuffix))
	if !found || bytes.IndexByte(b64, '"') >= 0 {
		return "", nil, true, errors.New("a data frame is not in its fixed form")
	}
	if _, _, err := streamName(string(name)); err != nil {
		return "", nil, true, err
	}
	return string(name), b64, true, nil
}

// streamName reads a data frame's stream: stdout, stderr or artifact:N.
func streamName(s string) (kind string, index int, err error) {
	switch s {
	case "stdout", "stderr":
		return s, 0, nil
	}
	if digits, ok := cutPrefix(s, "artifact:"); ok {
		n, err := strconv.Atoi(digits)
		if err == nil && n >= 0 && n < MaxArtifacts && strconv.Itoa(n) == digits {
			return "artifact", n, nil
		}
	}
	return "", 0, fmt.Errorf("a data frame names an unknown stream %q", truncate(s))
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return "", false
}

// decodeFrame strictly decodes one line that is not a data frame: a JSON object whose "type"
// is one of the stream's frame types and whose keys are exactly that frame's. What an error
// quotes of it is without secret.
func decodeFrame(line []byte, secret string) (any, error) {
	var head struct {
		Type json.RawMessage `json:"type"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, fmt.Errorf("a frame is not a JSON object")
	}
	var typ string
	if err := json.Unmarshal(head.Type, &typ); err != nil {
		return nil, errors.New(`a frame has no string "type"`)
	}
	var f any
	switch typ {
	case FrameAccepted:
		f = &Accepted{}
	case FrameError:
		f = &ErrorFrame{}
	case FrameProgress:
		f = &Progress{}
	case wire.TypeCall:
		f = &wire.Call{}
	case wire.TypeRead:
		f = &wire.Read{}
	case FrameResult:
		f = &ResultFrame{}
	case FrameData:
		return nil, errors.New("a data frame is not in its fixed form")
	default:
		return nil, fmt.Errorf("unknown frame type %q", quote(typ, secret))
	}
	if err := wire.Unmarshal(line, f); err != nil {
		return nil, fmt.Errorf("a %s frame is malformed: %v", typ, err)
	}
	return f, nil
}

// quote is a string of the service's for a message: without secret (when set), then cut.
func quote(s, secret string) string {
	if secret != "" {
		s = string(scrubbed([]byte(s), secret))
	}
	return truncate(s)
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
