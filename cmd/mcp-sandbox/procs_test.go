package main

import (
	"runtime"
	"testing"
)

func TestServeProcs(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 1, 3: 2, 4: 2, 64: 32} {
		if got := serveProcs(n); got != want {
			t.Errorf("serveProcs(%d) = %d, want %d", n, got, want)
		}
	}
}

// serve halves the runtime's GOMAXPROCS unless the environment names one, even empty, and
// restores it after.
func TestStartServeProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, tc := range []struct {
		name string
		env  map[string]string
		want int
	}{
		{"unset", map[string]string{"HOME": "/"}, 2},
		{"set", map[string]string{"GOMAXPROCS": "4"}, 4},
		{"empty", map[string]string{"GOMAXPROCS": ""}, 4},
	} {
		restore := startServeProcs(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		if got := runtime.GOMAXPROCS(0); got != tc.want {
			t.Errorf("%s: GOMAXPROCS %d while serving, want %d", tc.name, got, tc.want)
		}
		restore()
		if got := runtime.GOMAXPROCS(0); got != 4 {
			t.Errorf("%s: GOMAXPROCS %d after, want 4 restored", tc.name, got)
		}
	}
}
