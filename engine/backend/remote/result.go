package remote

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"mime"
	"reflect"
	"slices"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// finish checks the service's result against what was asked and what the stream delivered,
// and assembles the Outcome the caller gets. A result that claims more than the service may
// (a weaker isolation than required, wider terms, output it did not send, an artifact name no
// workspace holds) is withheld whole: provider_error, because a program that ran where it
// should not have cannot be un-run, but its output need not be handed on.
//
// Nothing the service says about the output is taken as said: the stdout and stderr
// attachments and previews are made here from the bytes that came (any other attachment it
// lists is dropped), artifacts are listed anew from what it sent, and every string of the
// result is scrubbed of the credential (docs/design.md §7.6).
func (x *execution) finish(r *engine.Outcome) *engine.Outcome {
	if msg := x.check(r); msg != "" {
		return x.providerError(true, "the sandbox service's result was withheld: "+msg)
	}
	res := *r
	st := x.st
	if len(res.Value) == 0 {
		res.Value = json.RawMessage("null")
	}
	if res.Failure != nil && res.Failure.Kind == failure.Cancelled && x.ending == "" {
		// The caller did not cancel: the service ended it (it is shutting down).
		return x.providerError(true, "the sandbox service ended the execution before the program did (it may be shutting down)")
	}
	var out, errs outputs.Attachment
	res.Stdout, res.StdoutData, out = x.output("stdout", &st.stdout, r.StdoutSize)
	res.Stderr, res.StderrData, errs = x.output("stderr", &st.stderr, r.StderrSize)
	res.Attachments = []outputs.Attachment{}
	if len(r.Attachments) > 0 || r.StdoutSize > 0 || r.StderrSize > 0 {
		// A program ran (a refusal has no streams): its two, and nothing else.
		res.Attachments = append(res.Attachments, out, errs)
	}
	res.Artifacts, res.ArtifactFiles = []outputs.Attachment{}, nil
	res.ArtifactsOmit = append([]engine.OmittedFile{}, r.ArtifactsOmit...)
	if x.s.opts.Artifacts.Collect {
		for i, claimed := range r.Artifacts {
			sk := st.artifacts[i]
			switch {
			case sk != nil && sk.dropped:
				res.ArtifactsOmit = append(res.ArtifactsOmit, engine.OmittedFile{Path: claimed.Name,
					Reason: fmt.Sprintf("the artifacts together are over this profile's artifacts.max_bytes (%d)", x.s.opts.Artifacts.MaxBytes)})
			case len(res.Artifacts) >= x.s.opts.Artifacts.MaxFiles:
				res.ArtifactsOmit = append(res.ArtifactsOmit, engine.OmittedFile{Path: claimed.Name,
					Reason: fmt.Sprintf("over this profile's artifacts.max_files (%d)", x.s.opts.Artifacts.MaxFiles)})
			default:
				var data []byte
				if sk != nil {
					data = x.scrubBytes(sk.kept)
				}
				// Only the name, the content type and (when it is what was sent) the text are
				// the service's; handle, location and reason are the caller's to make.
				a := outputs.Attachment{Name: claimed.Name, ContentType: x.contentType(claimed.ContentType),
					Size: int64(len(data)), Location: "preview_only"}
				if claimed.Text != nil && x.scrub(*claimed.Text) == string(data) {
					// The whole of a small text file is what was sent of it, or nothing.
					text := string(data)
					a.Text, a.Location = &text, "inline"
				}
				res.Artifacts = append(res.Artifacts, a)
				res.ArtifactFiles = append(res.ArtifactFiles, engine.ArtifactFile{Name: a.Name, Data: data})
			}
		}
	}
	x.scrubAll(&res)
	if msg := x.validArtifacts(&res); msg != "" {
		return x.providerError(true, "the sandbox service's result was withheld: "+msg)
	}
	if !json.Valid(res.Value) {
		return x.providerError(true, "the sandbox service's result was withheld: its value is not JSON once the credential is scrubbed from it")
	}
	return &res
}

// output is the preview, the kept bytes and the attachment of one output stream of which the
// program wrote size bytes (the service's count, never less than what came), all made from
// the bytes the stream delivered, scrubbed of the credential.
func (x *execution) output(name string, sk *sink, size int64) (string, []byte, outputs.Attachment) {
	preview := int(x.s.opts.PreviewBytes)
	truncated := size > int64(len(sk.kept))
	data := x.scrubBytes(sk.kept)
	if truncated {
		data = x.scrubCutEnd(data)
	}
	shift := int64(len(data) - len(sk.kept)) // what scrubbing changed, so the counts stay true
	var p string
	switch {
	case size > sk.n:
		// The service sent the first bytes only: of the rest the client knows the count.
		p = outputs.Preview(data, nil, size+shift, preview)
	case sk.dropped:
		tail := x.scrubCutStart(x.scrubBytes(sk.last))
		p = outputs.Preview(data, tail, sk.n+shift+int64(len(tail)-len(sk.last)), preview)
	default:
		p = outputs.Preview(data, data, int64(len(data)), preview)
	}
	a := outputs.Attachment{Name: name, ContentType: "text/plain", Size: size, Truncated: truncated || size > int64(preview), Location: "inline"}
	if a.Truncated {
		a.Location = "preview_only"
	}
	return p, data, a
}

// scrubCutEnd marks the credential where b, cut from what followed, ends in at least
// partMin of its first bytes: a whole credential cut by the client's ceiling would otherwise
// leave a piece of itself in the kept bytes.
func (x *execution) scrubCutEnd(b []byte) []byte {
	for k := len(x.secret) - 1; k >= partMin(x.secret); k-- {
		if bytes.HasSuffix(b, []byte(x.secret[:k])) {
			return slices.Concat(b[:len(b)-k], []byte(credentialMark))
		}
	}
	return b
}

// scrubCutStart is scrubCutEnd for bytes cut from what came before them.
func (x *execution) scrubCutStart(b []byte) []byte {
	for k := len(x.secret) - 1; k >= partMin(x.secret); k-- {
		if bytes.HasPrefix(b, []byte(x.secret[len(x.secret)-k:])) {
			return slices.Concat([]byte(credentialMark), b[k:])
		}
	}
	return b
}

// partMin is the shortest piece of a credential a cut is taken to have left: 8 bytes, or
// all but one of a shorter one. Shorter pieces tell little, and are often just text.
func partMin(secret string) int { return max(1, min(8, len(secret)-1)) }

// contentType is the service's content type for an artifact (check has parsed it), written
// anew without the credential; a type the scrub leaves unwritable is application/octet-stream.
func (x *execution) contentType(ct string) string {
	mt, params, _ := mime.ParseMediaType(ct)
	for k, v := range params {
		params[k] = x.scrub(v)
	}
	if out := mime.FormatMediaType(x.scrub(mt), params); out != "" {
		return out
	}
	return "application/octet-stream"
}

// scrubAll removes the credential from every string and byte slice of res, whatever field
// holds it: the walk is over the type, so a field added to the Outcome is scrubbed too.
func (x *execution) scrubAll(res *engine.Outcome) {
	if x.secret == "" {
		return
	}
	x.scrubValue(reflect.ValueOf(res).Elem())
}

func (x *execution) scrubValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(x.scrub(v.String()))
		}
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.CanSet() {
				v.SetBytes(x.scrubBytes(v.Bytes()))
			}
			return
		}
		for i := range v.Len() {
			x.scrubValue(v.Index(i))
		}
	case reflect.Array:
		for i := range v.Len() {
			x.scrubValue(v.Index(i))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			x.scrubValue(v.Elem())
		}
	case reflect.Interface:
		if v.IsNil() || !v.CanSet() {
			return
		}
		c := reflect.New(v.Elem().Type()).Elem()
		c.Set(v.Elem())
		x.scrubValue(c)
		v.Set(c)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				x.scrubValue(v.Field(i))
			}
		}
	case reflect.Map:
		if v.IsNil() || !v.CanSet() {
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			k := reflect.New(v.Type().Key()).Elem()
			k.Set(it.Key())
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(it.Value())
			x.scrubValue(k)
			x.scrubValue(e)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	}
}

// validArtifacts returns why res's artifact names cannot be handed on, or "": each must be a
// name a local backend could have collected (a clean workspace-relative path) and unique.
func (x *execution) validArtifacts(res *engine.Outcome) string {
	seen := map[string]bool{}
	for i, a := range res.Artifacts {
		if !validArtifactName(a.Name) {
			return fmt.Sprintf("artifact %d has a name no workspace holds (%q)", i, x.quote(a.Name))
		}
		if seen[a.Name] {
			return fmt.Sprintf("artifact %d repeats the name %q", i, x.quote(a.Name))
		}
		seen[a.Name] = true
	}
	return ""
}

// validArtifactName: a workspace-relative slash-separated path of at most 4096 bytes, each
// element a file name of at most 255 bytes (no "", ".", ".." or NUL), as the local backends'
// collection makes them.
func validArtifactName(name string) bool {
	if len(name) > 4096 || name == "." || !fs.ValidPath(name) || strings.IndexByte(name, 0) >= 0 {
		return false
	}
	for el := range strings.SplitSeq(name, "/") {
		if len(el) > 255 {
			return false
		}
	}
	return true
}

// validContentType: a MIME type, type "/" subtype with optional parameters (RFC 2045),
// of at most 256 bytes.
func validContentType(ct string) bool {
	if len(ct) > 256 {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	typ, sub, ok := strings.Cut(mt, "/")
	return ok && typ != "" && sub != "" && !strings.Contains(sub, "/")
}

// check returns why r cannot be handed on, or "".
func (x *execution) check(r *engine.Outcome) string {
	t, st := x.t, x.st
	if r.Failure != nil && !slices.Contains(failure.ResultKinds(), r.Failure.Kind) {
		return fmt.Sprintf("it names an unknown failure kind %q", x.quote(string(r.Failure.Kind)))
	}
	if r.LimitHit != nil && !r.LimitHit.Known() {
		return fmt.Sprintf("it names an unknown limit %q", x.quote(string(*r.LimitHit)))
	}
	if len(r.Value) > 0 && !json.Valid(r.Value) {
		return "its value is not JSON"
	}
	ran := r.Failure == nil || r.Failure.Executed || !r.Failure.Kind.Refusal()
	if !ran {
		// A refusal says nothing ran; a program that wrote, made a call or left a value did.
		// (Not stderr: a child that failed to set itself up says why there, and ran nothing.)
		switch {
		case st.stdout.n > 0 || r.StdoutSize > 0:
			return fmt.Sprintf("it says nothing ran (%s), yet the program wrote output", r.Failure.Kind)
		case x.called:
			return fmt.Sprintf("it says nothing ran (%s), yet the program called tools", r.Failure.Kind)
		case len(st.artifacts) > 0 || len(r.Artifacts) > 0:
			return fmt.Sprintf("it says nothing ran (%s), yet it sends artifacts", r.Failure.Kind)
		case len(r.Value) > 0 && string(r.Value) != "null":
			return fmt.Sprintf("it says nothing ran (%s), yet it sends a value", r.Failure.Kind)
		}
	}
	if ran && !r.Isolation.AtLeast(t.Isolation) {
		return fmt.Sprintf("the service described itself as reaching isolation %q, but ran the program at %q", t.Isolation, r.Isolation)
	}
	if wider(r.Terms, t) {
		return "the program ran under wider terms than were asked for"
	}
	for _, g := range r.Guarantees {
		if g != engine.Enforced && g != engine.Unverified && g != engine.Unavailable {
			return fmt.Sprintf("it names an unknown grade %q", x.quote(string(g)))
		}
	}
	if st.stdout.n > r.StdoutSize || st.stderr.n > r.StderrSize {
		return "it sent more output than the program wrote"
	}
	for i := range st.artifacts {
		if i >= len(r.Artifacts) {
			return fmt.Sprintf("it sent data for artifact %d, which it does not list", i)
		}
	}
	for i, a := range r.Artifacts {
		if !validArtifactName(a.Name) {
			return fmt.Sprintf("artifact %d has a name no workspace holds (%q)", i, x.quote(a.Name))
		}
		if !validContentType(a.ContentType) {
			return fmt.Sprintf("artifact %d has a content type that is not a MIME type (%q)", i, x.quote(a.ContentType))
		}
		var n int64
		if sk := st.artifacts[i]; sk != nil {
			n = sk.n
		}
		if n != a.Size {
			return fmt.Sprintf("artifact %d is listed with %d bytes and %d came", i, a.Size, n)
		}
	}
	return ""
}

// wider reports whether ran allows anything asked did not.
func wider(ran, asked engine.Terms) bool {
	const eps = 1e-9
	l, a := ran.Limits, asked.Limits
	return l.CPUSeconds > a.CPUSeconds+eps || l.WallSeconds > a.WallSeconds+eps || l.MemoryBytes > a.MemoryBytes ||
		l.FileSizeBytes > a.FileSizeBytes || l.ProcessCount > a.ProcessCount ||
		(asked.Network != engine.NetworkUnrestricted && ran.Network != asked.Network) ||
		!ran.Isolation.AtLeast(asked.Isolation)
}
