package main

import "runtime"

// serve runs Go's scheduler on half the CPUs the runtime found it may use (rounded up) when
// the operator did not set GOMAXPROCS (docs/design.md §19.4). The server's own work is mostly
// hand-offs between goroutines (a frame read, a call answered, an upstream's reply); with an
// idle P at hand, each hand-off woke another OS thread, and in a loop of binding calls the
// server switched threads about twenty times a call. Its children, the interpreters, do the
// computing on the other CPUs: the server used about a third of all CPU even at full load.
func serveProcs(n int) int { return max(1, (n+1)/2) }

// startServeProcs applies serveProcs when lookup (os.LookupEnv) finds no GOMAXPROCS in the
// environment (present, even empty, it is the operator's, and the runtime's reading of it
// stands), and returns what restores the runtime's own.
func startServeProcs(lookup func(string) (string, bool)) (restore func()) {
	if _, set := lookup("GOMAXPROCS"); set {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(serveProcs(runtime.GOMAXPROCS(0)))
	return func() { runtime.GOMAXPROCS(prev) }
}
