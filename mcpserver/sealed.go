package mcpserver

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// A requestState (MCP 2026-07-28, SEP-2322) travels to the client and comes back on the retry:
// whatever it says must be what this server said. It is sealed with AES-256-GCM under the
// server's state key (approvals.state_key, docs/design.md §10): the client can neither read it
// nor change a byte of it, and a state sealed for one tenant, Run or question opens only as
// that. The first key seals; every key opens, so a key is rotated by listing [new, old] until
// the old one's states have expired.

// StateKeyBytes is the size of one state key.
const StateKeyBytes = 32

// stateVersion is the first byte of a sealed state; another layout takes another number.
const stateVersion = 1

// stateAAD binds a sealed state to its purpose, so bytes sealed under the same key for any
// other use never open as a requestState.
var stateAAD = []byte("mcp-sandbox/requestState/v1")

// StateKeys seal and open requestStates. Safe for concurrent use.
type StateKeys struct {
	aeads []cipher.AEAD
}

// NewStateKeys returns the keys in the order given: the first seals, all open. Each must be
// StateKeyBytes long.
func NewStateKeys(keys ...[]byte) (*StateKeys, error) {
	if len(keys) == 0 {
		return nil, errors.New("state keys: none given")
	}
	s := &StateKeys{}
	for i, k := range keys {
		if len(k) != StateKeyBytes {
			return nil, fmt.Errorf("state key %d is %d bytes, want %d", i+1, len(k), StateKeyBytes)
		}
		b, err := aes.NewCipher(k)
		if err != nil {
			return nil, err
		}
		g, err := cipher.NewGCM(b)
		if err != nil {
			return nil, err
		}
		s.aeads = append(s.aeads, g)
	}
	return s, nil
}

// RandomStateKeys returns one fresh random key: the states it seals open only in this process,
// so a retry after a restart is refused.
func RandomStateKeys() *StateKeys {
	k := make([]byte, StateKeyBytes)
	_, _ = rand.Read(k) // crypto/rand.Read never fails
	s, _ := NewStateKeys(k)
	return s
}

// DecodeStateKey reads one key as written in a config: StateKeyBytes, in standard or URL-safe
// base64, padded or not.
func DecodeStateKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != StateKeyBytes {
				return nil, fmt.Errorf("the state key is %d bytes, want %d (e.g. openssl rand -base64 32)", len(b), StateKeyBytes)
			}
			return b, nil
		}
	}
	return nil, errors.New("the state key is not base64 (e.g. openssl rand -base64 32)")
}

// pendingState is what a requestState holds: whose question it is, which held call it
// continues, which questions it answers, and until when.
type pendingState struct {
	Tenant string `json:"t"`
	Agent  string `json:"a"`
	// Run is the Run the call belongs to when it is not the request itself: a named Run or a
	// session's; "" for a sessionless request of its own Run.
	Run string `json:"r,omitempty"`
	// Hold names the held call (a program, or a direct call) whose questions these are.
	Hold string `json:"h"`
	// Call is a digest of the tool called and its arguments: the retry must be the same call.
	Call string `json:"c"`
	// Questions are the ids of the input requests the retry answers.
	Questions []string `json:"q"`
	// Expires is when the questions close (Unix milliseconds).
	Expires int64 `json:"e"`
}

// errStateUnreadable is any state that does not open: tampered, truncated, sealed under
// another key, or not one of ours at all. Which, it does not say.
var errStateUnreadable = errors.New("does not open under this server's key: it was altered, cut short, or sealed by a server with another key (a restart without approvals.state_key changes it)")

// seal returns st as an opaque string.
func (k *StateKeys) seal(st pendingState) string {
	plain, _ := json.Marshal(st)
	g := k.aeads[0]
	out := make([]byte, 1, 1+g.NonceSize()+len(plain)+g.Overhead())
	out[0] = stateVersion
	nonce := make([]byte, g.NonceSize())
	_, _ = rand.Read(nonce)
	out = append(out, nonce...)
	out = g.Seal(out, nonce, plain, stateAAD)
	return base64.RawURLEncoding.EncodeToString(out)
}

// open returns the state s holds, or errStateUnreadable.
func (k *StateKeys) open(s string) (pendingState, error) {
	var st pendingState
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) < 1 || b[0] != stateVersion {
		return st, errStateUnreadable
	}
	b = b[1:]
	for _, g := range k.aeads {
		if len(b) < g.NonceSize()+g.Overhead() {
			return st, errStateUnreadable
		}
		plain, err := g.Open(nil, b[:g.NonceSize()], b[g.NonceSize():], stateAAD)
		if err != nil {
			continue
		}
		if json.Unmarshal(plain, &st) != nil || st.Hold == "" || len(st.Questions) == 0 {
			return pendingState{}, errStateUnreadable
		}
		return st, nil
	}
	return st, errStateUnreadable
}
