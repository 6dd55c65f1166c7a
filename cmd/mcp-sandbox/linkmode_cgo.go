//go:build linux && cgo

package main

// A package of ours that uses cgo has the go command link the binary with the system's
// linker, as go-landlock's psx did until the init helper made Landlock's system calls itself.
// Go's internal linker lays a cgo binary out so that each start takes about 100 more page
// faults and 1 ms more CPU (docs/design.md §19.1), which every init helper start would pay.
// Builds without cgo (the release archives) are linked by Go and do not have this file.
// (The comment just above import "C" would be its C preamble, hence the blank line.)

import "C" // no preamble: nothing of C is called
