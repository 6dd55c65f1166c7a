package toolshape

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
// upstream carried: a URL loses its userinfo, query and fragment (CleanURL, which upstream
// applies to an error's URL too); a call's arguments (Redact) also lose the values of
// secret-looking keys and of properties the tool's schema marks writeOnly or format
// "password", and are cut to a bound.

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

// CleanURL returns raw without its userinfo, query and fragment, since those may carry a
// secret; ok is false when raw does not parse as a URL.
func CleanURL(raw string) (string, bool) {
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
		if c, ok := CleanURL(m); ok {
			return c
		}
		return "<url>"
	})
}

// Redact renders args (a call's JSON arguments) as a person or a log line may see them:
// compact JSON with keys sorted, secret values replaced by Redacted (keys that look like
// secrets, and properties the input schema s marks writeOnly or format "password", at any
// depth s describes; s nil: none), URLs inside strings cleaned, strings over 200 bytes cut,
// and the whole at most max bytes (cut with "…"). Arguments that are not JSON are not shown.
func Redact(s *Schema, args json.RawMessage, max int) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if len(bytes.TrimSpace(args)) == 0 {
		v = map[string]any{}
	} else if err := dec.Decode(&v); err != nil {
		return "(arguments that are not JSON; not shown)"
	}
	b, err := json.Marshal(redactValue(v, s, 0))
	if err != nil {
		return "(arguments not shown)"
	}
	return Clip(string(b), max)
}

func redactValue(v any, s *Schema, depth int) any {
	if depth > maxRedactDepth {
		return "…"
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ps, _ := s.Property(k)
			if secretKey(k) || ps.secretProperty() != "" {
				out[k] = Redacted
				continue
			}
			out[k] = redactValue(e, ps, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactValue(e, s.itemSchema(), depth+1)
		}
		return out
	case string:
		x = scrubURLs(x)
		if len(x) > maxShownString {
			return fmt.Sprintf("%s (%d bytes)", Clip(x, maxShownString), len(x))
		}
		return x
	}
	return v
}
