package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// What go-sdk's wire types cannot carry of revision 2025-11-25's tasks, carried over HTTP here
// (docs/design.md §14.6): a tools/call's task field, which CallToolParams would drop, moved
// under _meta (metaTask) before go-sdk reads the request; and, in its answers, the tasks
// capability at initialize and run_code's execution.taskSupport in tools/list.

// tasksCapability is the server's tasks capability: tasks/list, tasks/cancel, and tools/call
// run as a task.
const tasksCapability = `"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`

// runCodeTaskSupport is run_code's execution, inserted before its name in a tools/list.
const runCodeTaskSupport = `"execution":{"taskSupport":"optional"},`

// taskWire serves next with the tasks of 2025-11-25 carried (see above).
func taskWire(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			// Too large, or cut off: go-sdk says so from what is left.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
			next.ServeHTTP(w, r)
			return
		}
		method, lifted := liftTask(body)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(lifted)), int64(len(lifted))
		switch method {
		case "initialize":
			w = &rewriting{ResponseWriter: w, old: []byte(`"capabilities":{`), new: []byte(`"capabilities":{` + tasksCapability + `,`)}
		case "tools/list":
			w = &rewriting{ResponseWriter: w, old: []byte(`"name":"run_code"`), new: []byte(runCodeTaskSupport + `"name":"run_code"`)}
		}
		next.ServeHTTP(w, r)
	})
}

// liftTask returns the method of the JSON-RPC request in body, and body with a tools/call's
// task field moved under _meta[metaTask]; anything else (a batch, a response, what does not
// parse) is returned as it is.
func liftTask(body []byte) (method string, out []byte) {
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil {
		return "", body
	}
	_ = json.Unmarshal(msg["method"], &method)
	if method != "tools/call" || !bytes.Contains(msg["params"], []byte(`"task"`)) {
		return method, body
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil || params["task"] == nil {
		return method, body
	}
	var meta map[string]json.RawMessage
	if m := params["_meta"]; m != nil && json.Unmarshal(m, &meta) != nil {
		return method, body
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[metaTask] = params["task"]
	delete(params, "task")
	var err error
	if params["_meta"], err = json.Marshal(meta); err != nil {
		return method, body
	}
	if msg["params"], err = json.Marshal(params); err != nil {
		return method, body
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return method, body
	}
	return method, b
}

// rewriting is a ResponseWriter that replaces the first occurrence of old with new in what
// is written (an answer as JSON, or as an SSE event: go-sdk writes each message in one Write).
type rewriting struct {
	http.ResponseWriter
	old, new []byte
	done     bool
}

func (w *rewriting) WriteHeader(code int) {
	w.Header().Del("Content-Length") // the body grows
	w.ResponseWriter.WriteHeader(code)
}

func (w *rewriting) Write(b []byte) (int, error) {
	if w.done || !bytes.Contains(b, w.old) {
		return w.ResponseWriter.Write(b)
	}
	w.done = true
	if _, err := w.ResponseWriter.Write(bytes.Replace(b, w.old, w.new, 1)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (w *rewriting) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the writer beneath (deadlines: internal/httpguard).
func (w *rewriting) Unwrap() http.ResponseWriter { return w.ResponseWriter }
