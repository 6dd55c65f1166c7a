package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

func TestServeGCApplies(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"neither", map[string]string{"HOME": "/"}, true},
		{"GOGC", map[string]string{"GOGC": "200"}, false},
		{"GOGC off", map[string]string{"GOGC": "off"}, false},
		{"GOGC empty", map[string]string{"GOGC": ""}, false},
		{"GOMEMLIMIT", map[string]string{"GOMEMLIMIT": "1GiB"}, false},
		{"both", map[string]string{"GOGC": "100", "GOMEMLIMIT": "1GiB"}, false},
	} {
		lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
		if got := gcApplies(lookup); got != tc.want {
			t.Errorf("%s: gcApplies = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestServeMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		live, other uint64
		want        int64
	}{
		{0, 0, gcFloor},
		{8 << 20, 4 << 20, gcFloor},
		{22 << 20, 4 << 20, gcFloor},
		{24 << 20, 4 << 20, 52 << 20},
		{1 << 30, 16 << 20, 2<<30 + 16<<20},
		{math.MaxUint64 / 2, math.MaxUint64 / 2, math.MaxInt64},
	} {
		if got := gcMemoryLimit(tc.live, tc.other); got != tc.want {
			t.Errorf("gcMemoryLimit(%d, %d) = %d, want %d", tc.live, tc.other, got, tc.want)
		}
	}
}

// gcSetting reads the runtime's GC percent and memory limit without changing them.
func gcSetting() (percent int, limit int64) {
	percent = debug.SetGCPercent(100)
	debug.SetGCPercent(percent)
	return percent, debug.SetMemoryLimit(-1)
}

// TestStartServeGC drives the runtime's own collector (not parallel: the setting is the
// process's): serve's setting applied only without GOGC and GOMEMLIMIT, the limit raised past
// the floor once a collection finds a live heap the floor would make it chase, and the
// runtime's setting back after stop.
func TestStartServeGC(t *testing.T) {
	percent0, limit0 := gcSetting()

	stop := startGC(func(k string) (string, bool) { return "50", k == "GOGC" })
	if p, l := gcSetting(); p != percent0 || l != limit0 {
		t.Errorf("with GOGC set: percent %d, limit %d; want the runtime's %d, %d", p, l, percent0, limit0)
	}
	stop()

	revised := make(chan struct{}, 1)
	stop = startGCTuner(func() {
		select {
		case revised <- struct{}{}:
		default:
		}
	})
	defer stop()
	if p, l := gcSetting(); p != gcPercent || l != gcFloor {
		t.Errorf("applied: percent %d, limit %d; want %d, %d", p, l, gcPercent, gcFloor)
	}
	// A live heap of 32 MiB: twice it is past the floor.
	live := make([][]byte, 32)
	for i := range live {
		live[i] = make([]byte, 1<<20)
		live[i][0] = 1
	}
	deadline := time.After(gate.Scaled(60 * time.Second))
	for {
		runtime.GC()
		select {
		case <-revised:
		case <-deadline:
			t.Fatal("no revision of the limit after a collection")
		}
		if _, l := gcSetting(); l >= 64<<20 {
			break
		}
		// A revision that ran for a collection before the heap was live: the next one.
	}
	runtime.KeepAlive(live)

	stop()
	stop()
	if p, l := gcSetting(); p != percent0 || l != limit0 {
		t.Errorf("after stop: percent %d, limit %d; want the runtime's %d, %d", p, l, percent0, limit0)
	}
}
