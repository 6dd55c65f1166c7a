package toolshape

import (
	"strings"
	"testing"
)

// TestMainInput: a saved program's input schema is its main's signature, and a main that
// cannot be read so is refused with the reason.
func TestMainInput(t *testing.T) {
	got, err := MainInput("import json\n\nasync def main(order_id: str, amount: float, note: Optional[str] = None,\n        tags: list[str] = [], n: int = 1):  # refund\n    return 1\n")
	if err != nil {
		t.Fatal(err)
	}
	// The properties in main's order, which the stub keeps.
	want := `{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"number"},"note":{"type":"string"},"tags":{"type":"array"},"n":{"type":"integer"}},"required":["order_id","amount"],"additionalProperties":false}`
	if string(got) != want {
		t.Errorf("MainInput = %s\nwant %s", got, want)
	}
	for code, why := range map[string]string{
		"return 1": "no top-level",
		"async def main(a: str):\n    pass\nasync def main(b: str):\n    pass": "more than once",
		"async def main(a):\n    pass":                                         "no annotation",
		"async def main(*args: str):\n    pass":                                "named parameters only",
		"async def main(a: set):\n    pass":                                    "not one a saved program",
		"async def main(a: str":                                                "not closed",
	} {
		if _, err := MainInput(code); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("MainInput(%q) = %v, want an error saying %q", code, err, why)
		}
	}
}
