package approval

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestWebhook: each notice is one POST of {"event": "approval_pending", "approval": Entry} with
// the bearer token, and Close sends what is queued before it returns.
func TestWebhook(t *testing.T) {
	var mu sync.Mutex
	var got []string
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, auth = append(got, string(b)), append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	h := NewWebhook(srv.URL, "s3cret", nil)
	for _, id := range []string{"q_1", "q_2"} {
		h.Notify(Entry{ID: id, Tenant: "t", Tool: "up__wipe", Arguments: "  s = 1\n", Status: "pending"})
	}
	h.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || auth[0] != "Bearer s3cret" {
		t.Fatalf("notices %q, authorization %q", got, auth)
	}
	var n struct {
		Event    string `json:"event"`
		Approval Entry  `json:"approval"`
	}
	if err := json.Unmarshal([]byte(got[1]), &n); err != nil || n.Event != "approval_pending" || n.Approval.ID != "q_2" ||
		n.Approval.Arguments != "  s = 1\n" {
		t.Errorf("notice %s: %+v, %v", got[1], n, err)
	}
}
