package cassette

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// Version is the format's version, the header's "cassette".
const Version = 1

// Header is a cassette's first line.
type Header struct {
	Cassette      int               `json:"cassette"`
	Program       string            `json:"program"`
	ProgramSHA256 string            `json:"program_sha256"`
	AgentVersion  string            `json:"agent_version"`
	Terms         json.RawMessage   `json:"terms"`
	Tools         map[string]string `json:"tools"` // name: sha256 of its definition's JSON
}

// Call is one binding call's line.
type Call struct {
	Seq  int    `json:"seq"`
	Tool string `json:"tool"`
	// Arguments are the call's arguments redacted as a log line shows them
	// (upstream.Tool.RedactArguments): JSON, or a string when they could not be shown as JSON.
	Arguments json.RawMessage `json:"arguments"`
	// Outcome is "ok", or the failure kind the program saw.
	Outcome string `json:"outcome"`
	Message string `json:"message,omitempty"`
	// Result is the value handed over whole; ResultRef stands for one kept under a handle.
	Result    json.RawMessage `json:"result,omitempty"`
	ResultRef *ResultRef      `json:"result_ref,omitempty"`
	Approval  string          `json:"approval"`
	Seconds   float64         `json:"seconds"`
}

// ResultRef is a result the program received as a handle: the handle (a reference to the blob
// store that kept it), and the first bytes of it the cassette keeps (the recorder's kept
// bytes at most; Cut says the rest is not in the cassette).
type ResultRef struct {
	Handle toolcall.Handle `json:"handle"`
	Kept   string          `json:"kept"`
	Cut    bool            `json:"cut"`
}

// End is a cassette's last line: the execution's result document.
type End struct {
	Result json.RawMessage `json:"result"`
}

// Cassette is a cassette read back.
type Cassette struct {
	Header Header
	Calls  []Call
	End    End
}

// Value returns the recorded result's "value", or nil.
func (c *Cassette) Value() json.RawMessage {
	var r struct {
		Value json.RawMessage `json:"value"`
	}
	_ = json.Unmarshal(c.End.Result, &r)
	return r.Value
}

// SHA256 is the hex sha256 of b.
func SHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// maxLineBytes bounds one line read back.
const maxLineBytes = 64 << 20

// Read reads a cassette: the header, the calls in order of their sequence numbers (1, 2, … with
// none missing), the end line.
func Read(r io.Reader) (*Cassette, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	var c Cassette
	var lines [][]byte
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			lines = append(lines, slices.Clone(l))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(lines) < 2 {
		return nil, errors.New("not a cassette: want a header line and a result line at least")
	}
	if err := strict(lines[0], &c.Header); err != nil || c.Header.Cassette != Version {
		return nil, fmt.Errorf("not a cassette of version %d: the header: %v", Version, err)
	}
	for i, l := range lines[1 : len(lines)-1] {
		var call Call
		if err := strict(l, &call); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+2, err)
		}
		if call.Seq != i+1 {
			return nil, fmt.Errorf("line %d: sequence number %d, want %d", i+2, call.Seq, i+1)
		}
		c.Calls = append(c.Calls, call)
	}
	if err := strict(lines[len(lines)-1], &c.End); err != nil || c.End.Result == nil {
		return nil, fmt.Errorf("the last line is not the result: %v", err)
	}
	return &c, nil
}

func strict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// Scrub replaces every secret in a cassette's bytes with "[redacted]", as it is and as JSON
// escapes it: `export` applies the exporting config's secrets to what the recorder kept.
func Scrub(data []byte, secrets []string) []byte { return scrub(data, secrets) }

// scrub replaces every secret in a line with "[redacted]", as it is and as JSON escapes it.
func scrub(line []byte, secrets []string) []byte {
	for _, s := range secrets {
		if s == "" {
			continue
		}
		line = bytes.ReplaceAll(line, []byte(s), []byte(redacted))
		if q, err := json.Marshal(s); err == nil {
			if e := strings.Trim(string(q), `"`); e != s {
				line = bytes.ReplaceAll(line, []byte(e), []byte(redacted))
			}
		}
	}
	return line
}

const redacted = "[redacted]"
