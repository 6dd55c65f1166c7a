// Package benchmarks measures, and never asserts, how fast mcp-sandbox is beside a baseline
// measured in the same run: these machines are noisy, so every figure is printed next to its
// baseline as a ratio. `make bench` runs TestReport with -bench-report; a plain `go test` runs
// it with a few samples only, to keep the harness from rotting.
package benchmarks
