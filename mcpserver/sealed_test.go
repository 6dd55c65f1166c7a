package mcpserver

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A state sealed under a key opens under a list that still holds it (rotation [new, old]),
// and under no list without it; the list's first key seals.
func TestStateKeyRotation(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte{1}, StateKeyBytes), bytes.Repeat([]byte{2}, StateKeyBytes)
	old, _ := NewStateKeys(oldKey)
	rotating, _ := NewStateKeys(newKey, oldKey)
	renewed, _ := NewStateKeys(newKey)
	st := pendingState{Tenant: "t", Agent: "a", Run: "named:r", Hold: "h_1", Call: "c", Questions: []string{"q_1"}, Expires: 42}

	sealed := old.seal(st)
	got, err := rotating.open(sealed)
	if err != nil || !cmp.Equal(got, st) {
		t.Errorf("sealed under the old key, opened by [new, old]: %+v %v", got, err)
	}
	if _, err := renewed.open(sealed); err == nil {
		t.Errorf("sealed under the old key, opened by [new] alone")
	}
	if _, err := renewed.open(rotating.seal(st)); err != nil {
		t.Errorf("[new, old] seals under new: %v", err)
	}
	if a, b := old.seal(st), old.seal(st); a == b {
		t.Errorf("two seals of one state are equal: the nonce repeats")
	}
	if strings.Contains(sealed, "named") {
		t.Errorf("the sealed state shows its content: %s", sealed)
	}
}

func TestDecodeStateKey(t *testing.T) {
	k := bytes.Repeat([]byte{7}, StateKeyBytes)
	for _, s := range []string{base64.StdEncoding.EncodeToString(k), base64.RawURLEncoding.EncodeToString(k)} {
		if got, err := DecodeStateKey(s); err != nil || !bytes.Equal(got, k) {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{base64.StdEncoding.EncodeToString(k[:16]), "not base64!", ""} {
		if _, err := DecodeStateKey(s); err == nil {
			t.Errorf("%q decoded as a key", s)
		}
	}
	if _, err := NewStateKeys(k[:31]); err == nil {
		t.Errorf("a 31-byte key accepted")
	}
}

// FuzzOpenState: no string a client sends opens unless it was sealed here, and none panics.
func FuzzOpenState(f *testing.F) {
	keys := RandomStateKeys()
	good := keys.seal(pendingState{Tenant: "t", Hold: "h", Questions: []string{"q"}})
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add("")
	f.Add("AQ")
	goodBytes, _ := base64.RawURLEncoding.DecodeString(good)
	f.Fuzz(func(t *testing.T, s string) {
		st, err := keys.open(s)
		if err != nil {
			return
		}
		// The decoder skips line breaks, so a spelling of the very same bytes may open.
		if b, _ := base64.RawURLEncoding.Strict().DecodeString(s); !bytes.Equal(b, goodBytes) {
			t.Errorf("%q opened as %+v", s, st)
		}
	})
}
