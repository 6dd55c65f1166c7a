//go:build unix

package owner

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestLease: no slot is leased twice while held, every slot is handed out before the pool
// says it is full, and a released slot comes free.
func TestLease(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pool")
	held := map[int]func(){}
	for range 4 {
		slot, release, err := Lease(dir, 4)
		if err != nil {
			t.Fatal(err)
		}
		if held[slot] != nil || slot < 0 || slot >= 4 {
			t.Fatalf("slot %d leased twice or out of range (held %v)", slot, held)
		}
		held[slot] = release
	}
	if _, _, err := Lease(dir, 4); !errors.Is(err, ErrAllLeased) {
		t.Fatalf("a fifth lease of four: %v, want ErrAllLeased", err)
	}
	held[2]()
	if slot, release, err := Lease(dir, 4); err != nil || slot != 2 {
		t.Fatalf("after slot 2's release: %d, %v; want 2", slot, err)
	} else {
		release()
	}
}

// TestShareKeepsOffRemoveUnheld: a file some process shares is not removed; once no one
// holds it, it is.
func TestShareKeepsOffRemoveUnheld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "in-use")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Share(path)
	if err != nil {
		t.Fatal(err)
	}
	if RemoveUnheld(path) {
		t.Fatal("a shared file was removed")
	}
	f.Close()
	if !RemoveUnheld(path) {
		t.Fatal("a file no one holds was not removed")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: %v, want removed", path, err)
	}
	if RemoveUnheld(filepath.Join(dir, strconv.Itoa(7))) {
		t.Fatal("a missing file reported removed")
	}
}
