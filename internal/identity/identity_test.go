package identity

import (
	"context"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// Children started ahead (warm pools) never wait for an identity and never take the range's
// last half, so an execution that finds no child ready waits only for running executions.
func TestLeaseAheadKeepsHalfTheRange(t *testing.T) {
	ids, err := Parse("1000-1003")
	if err != nil {
		t.Fatal(err)
	}
	var held []func()
	for range 2 {
		_, release, err := ids.Lease(context.Background(), true)
		if err != nil {
			t.Fatalf("ahead lease with more than half free: %v", err)
		}
		held = append(held, release)
	}
	start := time.Now()
	if _, _, err := ids.Lease(context.Background(), true); err == nil {
		t.Fatal("an ahead lease took an identity of the range's last half")
	}
	if d := time.Since(start); d > gate.Scaled(time.Second) {
		t.Errorf("an ahead lease waited %v", d)
	}
	// An execution's own lease still gets the rest, and waits (until its context ends) once
	// every identity is in use.
	for range 2 {
		_, release, err := ids.Lease(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, release)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := ids.Lease(ctx, false); err == nil {
		t.Fatal("a fifth lease of four identities")
	}
	for _, release := range held {
		release()
	}
	if _, _, err := ids.Lease(context.Background(), true); err != nil {
		t.Errorf("ahead lease once all are free again: %v", err)
	}
	// A shared identity is never scarce.
	shared, _ := Parse("65534:65534")
	if id, _, err := shared.Lease(context.Background(), true); err != nil || id.UID != 65534 || id.Exclusive {
		t.Errorf("shared ahead lease: %+v, %v", id, err)
	}
}
