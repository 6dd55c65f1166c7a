package toolshape

import "testing"

// TestStandIn: a stand-in takes the shape its schema declares, and is null without one.
func TestStandIn(t *testing.T) {
	for schema, want := range map[string]string{
		``:                               `null`,
		`true`:                           `null`,
		`{"type":"string"}`:              `""`,
		`{"type":["null","string"]}`:     `null`,
		`{"type":"integer"}`:             `0`,
		`{"type":"array","items":{}}`:    `[]`,
		`{"enum":["b","a"]}`:             `"b"`,
		`{"const":{"k":1}}`:              `{"k":1}`,
		`{"anyOf":[{"type":"boolean"}]}`: `false`,
		`{"type":"object","properties":{"ok":{"type":"boolean"},"id":{"type":"string"},"n":{"type":"number"},"tags":{"type":"array"},"sub":{"properties":{"x":{"type":"integer"}}}}}`: `{"id":"","n":0,"ok":false,"sub":{"x":0},"tags":[]}`,
	} {
		if got := string(StandIn(ParseSchema([]byte(schema)))); got != want {
			t.Errorf("StandIn(%s) = %s, want %s", schema, got, want)
		}
	}
}
