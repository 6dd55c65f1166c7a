package toolshape

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseSchema: one reading of a schema for every reader. Properties keep the order the
// server wrote them (a key written twice, twice, the last one's schema found), a keyword of
// the wrong JSON type reads as absent, what is not an object is no schema, and subschemas are
// followed to a bound.
func TestParseSchema(t *testing.T) {
	s := ParseSchema([]byte(`{"type":"object","properties":{"z":{"type":"string","description":"last"},"a":{"writeOnly":true},` +
		`"z":{"type":"integer","format":"password"},"t":true},"required":["z",1],"additionalProperties":false,"anyOf":[{"type":"string"},null]}`))
	if d := cmp.Diff([]string{"z", "a", "z", "t"}, s.propertyNames()); d != "" {
		t.Errorf("property names (-want +got):\n%s", d)
	}
	if z, ok := s.Property("z"); !ok || z.secretProperty() != "password" || strings.Join(z.types, ",") != "integer" {
		t.Errorf("z = %+v, want the last one written", z)
	}
	if a, _ := s.Property("a"); a.secretProperty() != "writeOnly" {
		t.Errorf("a is not writeOnly")
	}
	if p, ok := s.Property("t"); !ok || p != nil {
		t.Errorf("a property whose schema is true: listed %v, schema %+v; want listed, no schema", ok, p)
	}
	if _, ok := s.Property("nope"); ok {
		t.Errorf("a property not listed was found")
	}
	if s.requiredList || !s.closed || !s.composed || !s.isObjectType() || len(s.alternatives) != 2 || s.alternatives[1] != nil {
		t.Errorf("required list %v, closed %v, composed %v, object %v, alternatives %v", s.requiredList, s.closed, s.composed, s.isObjectType(), s.alternatives)
	}
	if d := cmp.Diff(Signature{Params: []string{"z", "a", "z", "t"}, Required: []string{}, Open: true}, newSignature(s)); d != "" {
		t.Errorf("signature (-want +got):\n%s", d)
	}

	wrong := ParseSchema([]byte(`{"type":5,"properties":[],"required":"a","items":"x","additionalProperties":{},"description":7,"writeOnly":"true","enum":{}}`))
	if wrong == nil || wrong.types != nil || wrong.propertiesObject || !wrong.hasProperties || wrong.requiredList ||
		wrong.items != nil || wrong.additional == nil || wrong.description != "" || wrong.writeOnly || wrong.enum != nil {
		t.Errorf("wrongly typed keywords read as %+v", wrong)
	}
	if d := cmp.Diff(Signature{Params: nil, Required: []string{}, Open: true}, newSignature(wrong)); d != "" {
		t.Errorf("signature of a schema with properties not an object (-want +got):\n%s", d)
	}
	for _, raw := range []string{`true`, `false`, `[]`, `"object"`, `null`, ``, `{`} {
		if s := ParseSchema([]byte(raw)); s != nil {
			t.Errorf("ParseSchema(%q) = %+v, want no schema", raw, s)
		}
	}
	if d := cmp.Diff(OpenSignature(), newSignature(nil)); d != "" {
		t.Errorf("the signature of no schema (-want +got):\n%s", d)
	}

	deep := strings.Repeat(`{"items":`, 2*maxParseDepth) + `{"type":"string"}` + strings.Repeat(`}`, 2*maxParseDepth)
	n := 0
	for s := ParseSchema([]byte(deep)); s != nil; s = s.items {
		n++
	}
	if n != maxParseDepth+1 {
		t.Errorf("followed %d levels of items, want %d", n, maxParseDepth+1)
	}
}

// TestForHosts: a host is shown an input schema only of type "object", as read.
func TestForHosts(t *testing.T) {
	for _, c := range []struct {
		raw string
		ok  bool
	}{
		{`{"type":"object","properties":{"a":{}}}`, true},
		{`{"type":["object"]}`, false},
		{`{"properties":{}}`, false},
		{`true`, false},
	} {
		in, _, _ := ReadInput([]byte(c.raw))
		got, ok := in.ForHosts()
		if ok != c.ok || ok && string(got) != c.raw {
			t.Errorf("%s: %s, %v", c.raw, got, ok)
		}
	}
	var none *Input
	if _, ok := none.ForHosts(); ok {
		t.Errorf("no schema is shown to hosts")
	}
}
