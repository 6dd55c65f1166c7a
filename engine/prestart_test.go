package engine

import "testing"

// A prestarted child runs the next program of its owner and terms, as a cold child (no
// warm-up, no pool kept or refilled); another owner's program never gets it, and Close ends
// one that no program took.
func TestPrestartOneChildForTheNextRun(t *testing.T) {
	b := &poolBackend{}
	r := poolRunner(t, b, WarmPolicy{})
	r.Prestart("acme", Terms{})
	r.Prestart("acme", Terms{}) // one at a time
	eventually(t, "the prestarted child", func() bool { return b.started.Load() == 1 })
	if n, _ := runValue(t, r, "other", Terms{}); n != 2 {
		t.Fatalf("another owner's program ran on child %d, want a child of its own (2)", n)
	}
	if n, warm := runValue(t, r, "acme", Terms{}); n != 1 || warm {
		t.Fatalf("acme's program ran on child %d (warm %v), want the prestarted child 1, cold", n, warm)
	}
	if n, _ := runValue(t, r, "acme", Terms{}); n != 3 {
		t.Fatalf("the next program ran on child %d, want a fresh one (3): nothing is kept", n)
	}
	b.mu.Lock()
	modes := append([]string(nil), b.modes...)
	b.mu.Unlock()
	for _, m := range modes {
		if m != "cold" {
			t.Fatalf("modes %v: every child here is started for its program", modes)
		}
	}
	r.Prestart("acme", Terms{})
	eventually(t, "a second prestarted child", func() bool { return b.started.Load() == 4 })
	r.Close()
	if n := b.alive(); n != 0 {
		t.Fatalf("%d children outlived Close", n)
	}
	r.Prestart("acme", Terms{}) // closed: nothing starts
	if b.started.Load() != 4 {
		t.Fatalf("Prestart after Close started a child")
	}
}
