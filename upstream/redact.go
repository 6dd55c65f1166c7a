package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// Redaction is one rule for whatever shows a person or a log line something a call or an
// upstream carried: a URL loses its userinfo, query and fragment (cleanURL, which redactErr
// applies to an error's URL too); a call's arguments (Tool.RedactArguments) also lose the
// values of secret-looking keys and of properties the tool's schema marks writeOnly or
// format "password", and are cut to a bound.

// Redacted is what replaces a value that is not shown.
const Redacted = "[redacted]"

// maxShownString bounds one string value in redacted arguments.
const maxShownString = 200

// maxRedactDepth bounds how deep redacted arguments are shown; deeper values are elided.
const maxRedactDepth = 16

// secretWords are the parts of a key, lowercased with "-", "_", "." and spaces removed, that
// mark its value as a secret. Over-redaction (max_tokens) is the safe side.
var secretWords = []string{"password", "passwd", "passphrase", "secret", "token", "apikey", "accesskey",
	"privatekey", "authorization", "credential", "cookie", "bearer", "sessionid"}

func secretKey(k string) bool {
	k = strings.Map(func(r rune) rune {
		switch r {
		case '-', '_', '.', ' ':
			return -1
		}
		return r
	}, strings.ToLower(k))
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// cleanURL returns raw without its userinfo, query and fragment, since those may carry a
// secret; ok is false when raw does not parse as a URL.
func cleanURL(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false
	}
	if u.RawQuery == "" && u.User == nil && u.Fragment == "" && !u.ForceQuery {
		return raw, true
	}
	clean := *u
	clean.RawQuery, clean.User, clean.Fragment, clean.ForceQuery = "", nil, "", false
	return clean.String(), true
}

var urlInText = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`) })

// scrubURLs applies cleanURL to every URL in s.
func scrubURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText().ReplaceAllStringFunc(s, func(m string) string {
		if c, ok := cleanURL(m); ok {
			return c
		}
		return "<url>"
	})
}

// RedactArguments renders args (a call's JSON arguments) as a person or a log line may see
// them: compact JSON with keys sorted, secret values replaced by Redacted (keys that look like
// secrets, and properties t's input schema marks writeOnly or format "password", at any depth
// the schema describes), URLs inside strings cleaned, strings over 200 bytes cut, and the
// whole at most max bytes (cut with "…"). Arguments that are not JSON are not shown.
func (t *Tool) RedactArguments(args json.RawMessage, max int) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if len(bytes.TrimSpace(args)) == 0 {
		v = map[string]any{}
	} else if err := dec.Decode(&v); err != nil {
		return "(arguments that are not JSON; not shown)"
	}
	var schema any
	if t != nil && t.Def != nil && t.Def.InputSchema != nil {
		if b, err := json.Marshal(t.Def.InputSchema); err == nil {
			_ = json.Unmarshal(b, &schema)
		}
	}
	b, err := json.Marshal(redactValue(v, schema, 0))
	if err != nil {
		return "(arguments not shown)"
	}
	return clip(string(b), max)
}

func redactValue(v, schema any, depth int) any {
	if depth > maxRedactDepth {
		return "…"
	}
	s, _ := schema.(map[string]any)
	switch x := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		out := make(map[string]any, len(x))
		for k, e := range x {
			ps, _ := props[k].(map[string]any)
			if secretKey(k) || ps["writeOnly"] == true || ps["format"] == "password" {
				out[k] = Redacted
				continue
			}
			out[k] = redactValue(e, props[k], depth+1)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactValue(e, s["items"], depth+1)
		}
		return out
	case string:
		x = scrubURLs(x)
		if len(x) > maxShownString {
			return fmt.Sprintf("%s (%d bytes)", clip(x, maxShownString), len(x))
		}
		return x
	}
	return v
}
