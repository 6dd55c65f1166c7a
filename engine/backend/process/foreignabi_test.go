//go:build linux

package process_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// int80Socket is a program that calls the i386 socket(AF_INET, SOCK_STREAM) through int 0x80
// from a few bytes of machine code: a filter written for x86-64 syscall numbers never sees it.
const int80Socket = `import ctypes, mmap
code = bytes([0xb8, 0x67, 0x01, 0, 0,   # mov eax, 359 (socket, i386)
              0xbb, 0x02, 0, 0, 0,      # mov ebx, AF_INET
              0xb9, 0x01, 0, 0, 0,      # mov ecx, SOCK_STREAM
              0x31, 0xd2,               # xor edx, edx
              0xcd, 0x80,               # int 0x80
              0xc3])                    # ret
buf = mmap.mmap(-1, len(code), prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(code)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
`

// TestForeignABICannotMakeASocket: the inet filter holds against the 32-bit entry point.
func TestForeignABICannotMakeASocket(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		gate.AppliesOnly(t, false, "the probe is x86-64 machine code")
	}
	gate.Hostile(t)
	r := newSandbox(t, engine.DefaultLimits, process.Options{})
	res := r.Run(context.Background(), engine.Execution{Program: int80Socket})
	if res.Failure != nil {
		t.Logf("the probe did not complete (%s: %s): no socket either way", res.Failure.Kind, res.Failure.Message)
		return
	}
	fd, err := strconv.Atoi(string(res.Value))
	if err != nil || fd >= 0 {
		t.Fatalf("socket via int 0x80 returned %s: the seccomp filter let a foreign ABI make an inet socket", res.Value)
	}
}
