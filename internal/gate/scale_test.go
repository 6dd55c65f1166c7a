package gate

import (
	"testing"
	"time"
)

func TestScaleTakesTheFactorCISets(t *testing.T) {
	t.Setenv(ScaleEnv, "")
	base := Scale()
	if base < 1 || base > maxLoadScale {
		t.Fatalf("Scale() = %g with nothing set, want 1 to %d", base, maxLoadScale)
	}
	t.Setenv(ScaleEnv, "50")
	if got := Scale(); got != 50 {
		t.Errorf("Scale() = %g with %s=50, want 50", got, ScaleEnv)
	}
	if got := Scaled(2 * time.Second); got != 100*time.Second {
		t.Errorf("Scaled(2s) = %v with %s=50, want 100s", got, ScaleEnv)
	}
	for _, bad := range []string{"0.5", "-3", "x"} {
		t.Setenv(ScaleEnv, bad)
		if got := Scale(); got < 1 {
			t.Errorf("Scale() = %g with %s=%s, want at least 1", got, ScaleEnv, bad)
		}
	}
}
