// Package shapetest is what the tests of tool shapes share: the hostile input schemas and
// arguments an upstream may send to crash or hang the host (FuzzSchema's seeds, and what the
// catalogue and the stubs are tested against), and the check that rendered stubs are Python
// that ast parses and mypy --strict accepts. Only tests import it.
//
// It imports internal/gate (the capabilities a test needs, python3 and mypy) and the standard
// library.
package shapetest
