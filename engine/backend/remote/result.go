package remote

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// finish checks the service's result against what was asked and what the stream delivered,
// and assembles the Outcome the caller gets. A result that claims more than the service may
// (a weaker isolation than required, wider terms, output it did not send) is withheld whole:
// provider_error, because a program that ran where it should not have cannot be un-run, but
// its output need not be handed on.
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
	res.StdoutData, res.StderrData = st.stdout.kept, st.stderr.kept
	res.Attachments = append([]engine.Attachment(nil), res.Attachments...)
	for i := range res.Attachments {
		a := &res.Attachments[i]
		a.Handle = "" // handles are the caller's to make
		if (a.Name == "stdout" && st.stdout.dropped) || (a.Name == "stderr" && st.stderr.dropped) {
			a.Truncated, a.Location = true, "preview_only"
		}
	}
	res.Artifacts, res.ArtifactFiles = []engine.Attachment{}, nil
	res.ArtifactsOmit = append([]engine.OmittedFile{}, r.ArtifactsOmit...)
	if x.s.opts.Artifacts.Collect {
		for i, a := range r.Artifacts {
			a.Handle = ""
			sk := st.artifacts[i]
			switch {
			case sk != nil && sk.dropped:
				res.ArtifactsOmit = append(res.ArtifactsOmit, engine.OmittedFile{Path: a.Name,
					Reason: fmt.Sprintf("the artifacts together are over this profile's artifacts.max_bytes (%d)", x.s.opts.Artifacts.MaxBytes)})
			case len(res.Artifacts) >= x.s.opts.Artifacts.MaxFiles:
				res.ArtifactsOmit = append(res.ArtifactsOmit, engine.OmittedFile{Path: a.Name,
					Reason: fmt.Sprintf("over this profile's artifacts.max_files (%d)", x.s.opts.Artifacts.MaxFiles)})
			default:
				var data []byte
				if sk != nil {
					data = sk.kept
				}
				if a.Text != nil && *a.Text != string(data) {
					// The whole of a small text file is what was sent of it, or nothing.
					a.Text, a.Location = nil, "preview_only"
				}
				res.Artifacts = append(res.Artifacts, a)
				res.ArtifactFiles = append(res.ArtifactFiles, engine.ArtifactFile{Name: a.Name, Data: data})
			}
		}
	}
	x.scrubResult(&res)
	return &res
}

// scrubResult removes the credential from every text of res the service wrote.
func (x *execution) scrubResult(res *engine.Outcome) {
	if x.secret == "" {
		return
	}
	res.Value = x.scrubBytes(res.Value)
	if res.ValueRepr != nil {
		v := x.scrub(*res.ValueRepr)
		res.ValueRepr = &v
	}
	for i := range res.Artifacts {
		if t := res.Artifacts[i].Text; t != nil {
			v := x.scrub(*t)
			res.Artifacts[i].Text = &v
		}
	}
	res.Stdout, res.Stderr = x.scrub(res.Stdout), x.scrub(res.Stderr)
	res.StdoutData, res.StderrData = x.scrubBytes(res.StdoutData), x.scrubBytes(res.StderrData)
	if res.Failure != nil {
		f := *res.Failure
		f.Message, f.Traceback = x.scrub(f.Message), x.scrub(f.Traceback)
		res.Failure = &f
	}
	for i := range res.ArtifactFiles {
		res.ArtifactFiles[i].Data = x.scrubBytes(res.ArtifactFiles[i].Data)
	}
	for i := range res.ArtifactsOmit {
		res.ArtifactsOmit[i].Reason = x.scrub(res.ArtifactsOmit[i].Reason)
	}
}

// check returns why r cannot be handed on, or "".
func (x *execution) check(r *engine.Outcome) string {
	t, st := x.t, x.st
	if r.Failure != nil && !slices.Contains(failure.ResultKinds(), r.Failure.Kind) {
		return fmt.Sprintf("it names an unknown failure kind %q", truncate(string(r.Failure.Kind)))
	}
	if r.LimitHit != nil && !r.LimitHit.Known() {
		return fmt.Sprintf("it names an unknown limit %q", truncate(string(*r.LimitHit)))
	}
	if len(r.Value) > 0 && !json.Valid(r.Value) {
		return "its value is not JSON"
	}
	ran := r.Failure == nil || r.Failure.Executed || !r.Failure.Kind.Refusal()
	if ran && !r.Isolation.AtLeast(t.Isolation) {
		return fmt.Sprintf("the service described itself as reaching isolation %q, but ran the program at %q", t.Isolation, r.Isolation)
	}
	if wider(r.Terms, t) {
		return "the program ran under wider terms than were asked for"
	}
	for _, g := range r.Guarantees {
		if g != engine.Enforced && g != engine.Unverified && g != engine.Unavailable {
			return fmt.Sprintf("it names an unknown grade %q", truncate(string(g)))
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
