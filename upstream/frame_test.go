package upstream

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestDecodeFrameAsTheSDK: decodeFrame decodes every frame as jsonrpc.DecodeMessage does, and
// refuses what it refuses: requests, notifications, results, errors, keys of another case,
// a "method" key with an empty name, a wrong version, no id, ids of each kind, trailing bytes,
// nesting past the bound; and the message does not share the line's bytes.
func TestDecodeFrameAsTheSDK(t *testing.T) {
	for _, frame := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"2"}],"structuredContent":{"sum":2}}}`,
		`{"jsonrpc":"2.0","id":"a7","result":{}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad","data":{"x":[1,2]}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"roots/list","params":{"_meta":{"k":"v"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","id":5,"method":""}`,
		`{"jsonrpc":"2.0","ID":6,"Result":{"a":1}}`,
		`{"jsonrpc":"2.0","id":7,"Result":{"a":1},"result":{"b":2}}`,
		`{"JSONRPC":"2.0","id":8,"result":{}}`,
		`{"jsonrpc":"1.0","id":9,"result":{}}`,
		`{"jsonrpc":"2.0","result":{}}`,
		`{"jsonrpc":"2.0","id":null,"result":{}}`,
		`{"jsonrpc":"2.0","id":1.5,"result":{}}`,
		`{"jsonrpc":"2.0","id":true,"result":{}}`,
		`{"jsonrpc":"2.0","id":10,"method":7}`,
		`{"jsonrpc":"2.0","id":11,"result":{}} trailing`,
		`{"jsonrpc":"2.0","id":12,"result":{"deep":` + strings.Repeat("[", 1200) + strings.Repeat("]", 1200) + `}}`,
		`{"jsonrpc":"2.0","id":13,"result":{"deep":` + strings.Repeat("[", 990) + strings.Repeat("]", 990) + `}}`,
		`{"jsonrpc":"2.0","id":14,"result":`,
		`not json`,
		``,
		`[]`,
	} {
		want, wantErr := jsonrpc.DecodeMessage([]byte(frame))
		line := []byte(frame)
		got, err := decodeFrame(line)
		if (err == nil) != (wantErr == nil) {
			t.Errorf("%.80s: error %v, the go-sdk's %v", frame, err, wantErr)
			continue
		}
		if wantErr != nil {
			if tooDeep(wantErr) != tooDeep(err) {
				t.Errorf("%.80s: too deep %v, the go-sdk's %v", frame, tooDeep(err), tooDeep(wantErr))
			}
			continue
		}
		for i := range line {
			line[i] = 'x' // the caller reuses its buffer
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b jsonrpc.ID) bool { return a == b })); diff != "" {
			t.Errorf("%.80s: (-go-sdk +decodeFrame)\n%s", frame, diff)
		}
	}
}
