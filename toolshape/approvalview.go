package toolshape

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// ApprovalView renders args (a call's JSON arguments) as the person asked to approve the call
// reads them, or says why it cannot: a question shows everything that decides it, or it is
// not asked (the approval_required_in_program refusal carries the reason). s is the tool's
// input schema (nil: none).
//
// Every leaf is one line "path = value", its value in full as JSON (so a string cannot forge
// a line), for every key path at every depth: no bound cuts a value or drops a key. At each
// level the properties the tool's input schema declares come first (sorted), then the others
// (sorted), so no number of padding keys pushes a declared value down the page. Hidden, and
// listed with the reason, are only the values of properties the schema marks writeOnly or
// format "password": the tool's author, not the program, decided those are secrets. A string
// under a key that only looks like a secret (secretKey) can be neither shown (it may be one)
// nor hidden (the program chose the name, and the value may decide the call), so such
// arguments are not put to a person; a number, boolean or null under such a key (max_tokens)
// is shown. Arguments nested deeper than maxRedactDepth, or whose view exceeds max bytes, are
// not put to a person either. why is "" when view is complete; otherwise view is "" and why
// is a phrase completing "a question could not show its arguments: ...".
func ApprovalView(s *Schema, args json.RawMessage, max int) (view, why string) {
	var v any
	if len(bytes.TrimSpace(args)) == 0 {
		v = map[string]any{}
	} else {
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return "", "they are not JSON"
		}
	}
	w := viewWriter{max: max}
	w.value("", v, s, 0)
	if w.why != "" {
		return "", w.why
	}
	if len(w.lines) == 0 {
		w.lines = append(w.lines, "(no arguments)")
	}
	var b strings.Builder
	for _, l := range w.lines {
		b.WriteString("  ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if len(w.hidden) > 0 {
		b.WriteString("Not shown: ")
		b.WriteString(strings.Join(w.hidden, "; "))
		b.WriteByte('\n')
	}
	if b.Len() > max {
		return "", fmt.Sprintf("they take %d bytes to show in full, more than the %d a question holds", b.Len(), max)
	}
	return b.String(), ""
}

// viewWriter collects the lines of an ApprovalView; the first reason it cannot be complete
// stops it.
type viewWriter struct {
	max    int
	size   int
	lines  []string
	hidden []string
	why    string
}

func (w *viewWriter) add(line string) {
	w.size += len(line) + 3
	if w.size > w.max {
		w.why = fmt.Sprintf("they take more than the %d bytes a question holds to show in full", w.max)
		return
	}
	w.lines = append(w.lines, line)
}

var plainKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`) })

// keyPath is path extended by object key k: ".k" for a plain key, else `["k"]` quoted.
func keyPath(path, k string) string {
	if plainKey().MatchString(k) {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	q, _ := json.Marshal(k)
	return path + "[" + string(q) + "]"
}

func (w *viewWriter) value(path string, v any, s *Schema, depth int) {
	if w.why != "" {
		return
	}
	if depth > maxRedactDepth {
		w.why = fmt.Sprintf("%s nests deeper than the %d levels a question shows", cmpPath(path), maxRedactDepth)
		return
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			w.add(cmpPath(path) + " = {}")
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			_, da := s.Property(a)
			_, db := s.Property(b)
			if da != db {
				if da {
					return -1
				}
				return 1
			}
			return strings.Compare(a, b)
		})
		for _, k := range keys {
			p := keyPath(path, k)
			ps, _ := s.Property(k)
			switch ps.secretProperty() {
			case "writeOnly":
				w.hidden = append(w.hidden, p+" (the tool's schema marks it writeOnly)")
				w.add(p + " = " + Redacted)
				continue
			case "password":
				w.hidden = append(w.hidden, p+" (the tool's schema marks it a password)")
				w.add(p + " = " + Redacted)
				continue
			}
			if _, str := x[k].(string); str && secretKey(k) {
				w.why = fmt.Sprintf("%s is named like a secret, so its value can be neither shown nor hidden from the person (the tool's schema does not mark it writeOnly)", p)
				return
			}
			w.value(p, x[k], ps, depth+1)
			if w.why != "" {
				return
			}
		}
	case []any:
		if len(x) == 0 {
			w.add(cmpPath(path) + " = []")
			return
		}
		for i, e := range x {
			w.value(fmt.Sprintf("%s[%d]", path, i), e, s.itemSchema(), depth+1)
			if w.why != "" {
				return
			}
		}
	case string:
		if c, hid := hideUserinfoPasswords(x); hid {
			w.hidden = append(w.hidden, path+" (the password in a URL's userinfo)")
			x = c
		}
		b, _ := json.Marshal(x)
		w.add(cmpPath(path) + " = " + string(b))
	default:
		b, err := json.Marshal(x)
		if err != nil {
			w.why = "a value does not render as JSON"
			return
		}
		w.add(cmpPath(path) + " = " + string(b))
	}
}

// cmpPath names the arguments themselves when path is empty.
func cmpPath(path string) string {
	if path == "" {
		return "(arguments)"
	}
	return path
}

// hideUserinfoPasswords replaces the password of every URL in s that carries one
// ("user:password@host") with Redacted: a credential, never what a person decides. The rest
// of the URL, its query included, is shown.
func hideUserinfoPasswords(s string) (string, bool) {
	if !strings.Contains(s, "://") || !strings.Contains(s, "@") {
		return s, false
	}
	hid := false
	out := urlInText().ReplaceAllStringFunc(s, func(m string) string {
		u, err := url.Parse(m)
		if err != nil || u.User == nil {
			return m
		}
		if _, ok := u.User.Password(); !ok {
			return m
		}
		i := strings.Index(m, "://") + 3
		auth := m[i:]
		if e := strings.IndexAny(auth, "/?#"); e >= 0 {
			auth = auth[:e]
		}
		at := strings.LastIndex(auth, "@")
		if at < 0 {
			return m
		}
		colon := strings.Index(auth[:at], ":")
		if colon < 0 {
			return m
		}
		hid = true
		return m[:i+colon+1] + Redacted + m[i+at:]
	})
	return out, hid
}
