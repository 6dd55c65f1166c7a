// Package egresstest is what tests of the egress proxy share: an HTTPS origin on 127.0.0.1
// whose certificate an egress CA of its own signed (Origin), with that CA as a pool for
// engine.RunnerOptions' egress policy or as a PEM file for SSL_CERT_FILE, and the rule that
// allows it. The origin listens on loopback only, as every test's traffic must.
//
// Only tests import it. It imports egress and the standard library.
//
// Concurrency: an Origin's fields are set before NewOrigin returns and never change; its
// handler runs on the server's goroutines, so what it records needs a lock of the test's.
package egresstest
