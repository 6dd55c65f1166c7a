package binding

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its test: every goroutine has an owner
// that waits for it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
