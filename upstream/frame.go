package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sjson "github.com/segmentio/encoding/json"
)

// decodeFrame is jsonrpc.DecodeMessage without the fresh 32 KiB buffer its decoder takes for
// every frame (json.NewDecoder over the frame's bytes): a third of all the server allocated
// under a loop of binding calls, and of the collector's work. The decoding is the go-sdk's:
// the same decoder (segmentio's) with the same strictness (keys match exactly, never by case),
// the same wire form and the same checks (the nesting bound first: the decoder recurses), on a
// copy of line (the caller reuses its buffer).
// TestDecodeFrameAsTheSDK holds it to DecodeMessage.
func decodeFrame(line []byte) (jsonrpc.Message, error) {
	var w struct {
		VersionTag string          `json:"jsonrpc"`
		ID         any             `json:"id,omitempty"`
		Method     json.RawMessage `json:"method"` // raw: a "method" key present with "" is a request
		Params     json.RawMessage `json:"params,omitempty"`
		Result     json.RawMessage `json:"result,omitempty"`
		Error      *jsonrpc.Error  `json:"error,omitempty"`
	}
	if NestingDepth(line) > maxFrameDepth { // the go-sdk's check, and its words (tooDeep)
		return nil, fmt.Errorf("unmarshaling jsonrpc message: json: exceeded maximum nesting depth of %d", maxFrameDepth)
	}
	data := bytes.Clone(line)
	if _, err := sjson.Parse(data, &w, sjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if w.VersionTag != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", w.VersionTag, "2.0")
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, err
	}
	if len(w.Method) > 0 {
		var method string
		if _, err := sjson.Parse(w.Method, &method, sjson.DontMatchCaseInsensitiveStructFields); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{Method: method, ID: id, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errInvalidMessage
	}
	r := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil { // an untyped nil, not a nil *jsonrpc.Error
		r.Error = w.Error
	}
	return r, nil
}

// errInvalidMessage is a frame that is neither a request (no method) nor a response (no id).
var errInvalidMessage = errors.New("JSON RPC invalid request")
