// Package cassette records one execution's binding calls and plays them back
// (docs/design.md §17): `mcp-sandbox run --record FILE` writes a cassette, `mcp-sandbox
// replay` runs a program against one with no upstream started.
//
// A cassette is JSON Lines: a Header (the program and its hash, the agent's version, the
// terms, the sha256 of each recorded tool's definition), one Call per binding call in order of
// its sequence number (built-ins included), and End, the execution's result document. A
// Recorder is the binding.Tape that keeps the calls: arguments redacted as a log line shows
// them (upstream.Tool.RedactArguments), a result kept under a handle as its handle and its
// first bytes (the kept bytes it was made with, cassettes.kept_bytes; cut beyond and marked
// so), and every secret the caller names replaced with "[redacted]" anywhere in the file
// (Scrub does it again to a cassette exported from the ledger). A Player is the binding.Tape
// that answers each call from the cassette by sequence number; the first call of another tool
// or with other arguments (compared redacted, with the recording's redacted places masked), or
// past the end, is answered replay_diverged, and so is every call after it. Its Blobs are the
// replay's blob store: the kept bytes under the recorded handles, so handle.read() reads them.
//
// A Journal is the tape of a program that may pause on a person's approval (mcpserver keeps
// it in the ledger with the pause): the same lines, results whole, and the calls in flight.
// A program run again after its process was gone resumes from one: NewResumer is a Player
// whose calls past the journal are made live, the first of them checked to be the call the
// program paused on (docs/design.md §11).
//
// It imports binding (the Tape it implements), upstream and toolshape (redaction), outputs (the
// BlobStore a replay reads handles from), toolcall (answers) and failure. Recorder and Player
// are safe for concurrent use.
package cassette
