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

// Version is the protocol version: the /v1 of every route, and the "protocol" field of a
// describe answer and of a start request. Anything that changes a route, a frame or the
// result's shape is a new version.
const Version = 1

// The routes. An execution's own routes are PathExecutions + "/{id}/results" and
// PathExecutions + "/{id}/cancel".
const (
	PathDescribe   = "/v1/describe"
	PathExecutions = "/v1/executions"
	PathHealth     = "/healthz"
	PathReady      = "/readyz"
)

// ContentType is the media type of an execution's frame stream.
const ContentType = "application/x-ndjson"

func resultsPath(id string) string { return PathExecutions + "/" + id + "/results" }
func cancelPath(id string) string  { return PathExecutions + "/" + id + "/cancel" }

// Frame types of the stream, service to client.
const (
	FrameAccepted = "accepted"
	FrameError    = "error"
	FrameProgress = "progress"
	FrameCall     = "call"
	FrameRead     = "read"
	FrameData     = "data"
	FrameResult   = "result"
)

// DescribeAnswer is the body of GET /v1/describe.
type DescribeAnswer struct {
	Protocol int `json:"protocol"`
	// AllowNetwork: the service's profile may grant an execution network access.
	AllowNetwork bool               `json:"allow_network"`
	Description  engine.Description `json:"description"`
}

// StartRequest is the body of POST /v1/executions.
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

// Call asks the caller to call a tool for the program. IDs of calls and reads increase
// strictly within a stream.
type Call struct {
	Type string          `json:"type"`
	ID   int64           `json:"id"`
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// Read asks the caller for a window of a handle one of the program's calls produced.
type Read struct {
	Type    string `json:"type"`
	ID      int64  `json:"id"`
	Handle  string `json:"handle"`
	Offset  int    `json:"offset"`
	Limit   int    `json:"limit"`
	Pattern string `json:"pattern"`
}

// ResultFrame ends a stream that was accepted: the execution's Result, whose captured bytes
// (stdout, stderr, artifacts) came before it in data frames.
type ResultFrame struct {
	Type      string        `json:"type"`
	Execution string        `json:"execution"`
	Result    engine.Result `json:"result"`
}

// Reply is the body of POST /v1/executions/{id}/results: the answer to one call or read.
type Reply struct {
	ID      int64           `json:"id"`
	OK      bool            `json:"ok"`
	Value   json.RawMessage `json:"value,omitempty"`
	Handle  *Handle         `json:"handle,omitempty"`
	Kind    string          `json:"kind,omitempty"`
	Message string          `json:"message,omitempty"`
}

// Handle stands for a result too large to hand over whole.
type Handle struct {
	ID    string `json:"id"`
	Size  int64  `json:"size"`
	Lines int    `json:"lines"`
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
	// dataChunk is how many bytes one data frame carries at most.
	dataChunk = 192 << 10
	// maxArtifacts bounds the artifact index a data frame may name.
	maxArtifacts = 4096
)

// appendData appends the data frame carrying b for stream, with its newline, to dst.
func appendData(dst []byte, stream string, b []byte) []byte {
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
		if err == nil && n >= 0 && n < maxArtifacts && strconv.Itoa(n) == digits {
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
// is one of the stream's frame types and whose keys are exactly that frame's.
func decodeFrame(line []byte) (any, error) {
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
	case FrameCall:
		f = &Call{}
	case FrameRead:
		f = &Read{}
	case FrameResult:
		f = &ResultFrame{}
	case FrameData:
		return nil, errors.New("a data frame is not in its fixed form")
	default:
		return nil, fmt.Errorf("unknown frame type %q", truncate(typ))
	}
	if err := wire.Unmarshal(line, f); err != nil {
		return nil, fmt.Errorf("a %s frame is malformed: %v", typ, err)
	}
	return f, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
