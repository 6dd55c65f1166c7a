// Package testkit is what the tests of several packages would otherwise each rebuild: the
// mcp-sandbox binary and the mock upstream (conformance/mockupstream), each built once per
// test process and removed when the tests end (Run); the text of a tool result as a model
// reads it (Text); a log sink that keeps a process's stderr and echoes it into the test log
// (Log); a config file written for one test (WriteConfig); a process started with its stdin
// and stdout held by the test (StartPiped); the live processes carrying a tag in their
// environment (Tagged, Linux); the check that a note or advice names what it
// must, or is empty (Mentions); a connection closed with the test, and whether a server
// closes one (DialTCP, ClosedWithin); a Wine prefix of a test's own (OwnWinePrefix); and a
// client of revision 2025-11-25 over HTTP speaking JSON-RPC by hand (RPC).
//
// It imports the go-sdk and the standard library. Only tests import it (meta_test.go keeps it
// so). Builds are serialised by a sync.Once per program; a Log may be written from any
// goroutine.
package testkit
