package execution

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// ValuePreviewBytes is how much of a value (or value_repr) a rendering for the model shows; a
// longer one is also kept under a handle (attachment "value", "value_repr"), so the rest can
// be paged.
const ValuePreviewBytes = 4000

// ledgerAttachment is an attachment as the ledger keeps it: the result's fields plus, for an
// output kept as a preview only, how many bytes were let go.
type ledgerAttachment struct {
	outputs.Attachment
	LetGoBytes int64 `json:"let_go_bytes,omitempty"`
}

// keeper keeps one execution's outputs in the blob store.
type keeper struct {
	blobs  outputs.BlobStore
	tenant string
	log    *slog.Logger
	report telemetry.Reporter

	preserved int64    // bytes kept, to be charged as preserved
	lost      []string // outputs that are previews only though they were larger
}

// keep puts the streams larger than their preview, a value larger than ValuePreviewBytes and
// every artifact in the blob store, filling in handles and locations; without a store, when a
// Put fails or the tenant's stored-bytes quota has no room, they stay preview_only with the
// reason, and the bytes let go are counted. It returns the ledger's
// attachment records.
func (k *keeper) keep(ctx context.Context, res *engine.Outcome) []ledgerAttachment {
	recs := []ledgerAttachment{}
	for i := range res.Attachments {
		a := &res.Attachments[i]
		var data []byte
		switch a.Name {
		case "stdout":
			data = res.StdoutData
		case "stderr":
			data = res.StderrData
		default:
			continue
		}
		letGo := k.put(ctx, a, data, !a.Truncated && a.Location != "preview_only")
		recs = append(recs, ledgerAttachment{Attachment: *a, LetGoBytes: letGo})
	}
	// A large value (or value_repr) is an attachment too: the model's text shows a preview,
	// and the whole is kept under a handle, a value indented so line windows can page it.
	attach := func(name, ctype string, content []byte) {
		a := outputs.Attachment{Name: name, ContentType: ctype, Size: int64(len(content)), Truncated: true}
		letGo := k.put(ctx, &a, content, false)
		res.Attachments = append(res.Attachments, a)
		recs = append(recs, ledgerAttachment{Attachment: a, LetGoBytes: letGo})
	}
	if len(res.Value) > ValuePreviewBytes {
		content, ctype := binding.HandleContent(res.Value)
		attach("value", ctype, content)
	}
	if r := res.ValueRepr; r != nil && len(*r) > ValuePreviewBytes {
		attach("value_repr", "text/plain", []byte(*r))
	}
	for i := range res.Artifacts {
		a := &res.Artifacts[i]
		if i >= len(res.ArtifactFiles) {
			break
		}
		lostBefore := len(k.lost)
		letGo := k.put(ctx, a, res.ArtifactFiles[i].Data, false)
		if a.Text != nil {
			// The whole file is in the result (its handle, if kept, is for read_tool_output):
			// kept or not, nothing of it was let go.
			a.Location, letGo, k.lost = "inline", 0, k.lost[:lostBefore]
		}
		recs = append(recs, ledgerAttachment{Attachment: *a, LetGoBytes: letGo})
	}
	return recs
}

// put keeps one output, or leaves it inline when whole; it returns the bytes let go.
func (k *keeper) put(ctx context.Context, a *outputs.Attachment, data []byte, whole bool) int64 {
	if whole {
		a.Location = "inline"
		return 0
	}
	if k.blobs == nil {
		return k.notKept(a, "there is no blob store")
	}
	hd, n, err := k.blobs.Put(ctx, k.tenant, a.Name, a.ContentType, bytes.NewReader(data), int64(len(data))+1)
	if err != nil {
		k.log.Warn("output not preserved", "name", a.Name, "err", err)
		if errors.Is(err, outputs.ErrOverQuota) {
			return k.notKept(a, err.Error()) // says which quota, in the tenant's own figures
		}
		return k.notKept(a, "the blob store failed to keep it")
	}
	a.Handle, a.Location = string(hd), "blob"
	k.preserved += n
	k.report.Kept("output", n)
	return a.Size - n
}

// notKept leaves an output as a preview, saying why in its attachment; it returns the bytes
// let go.
func (k *keeper) notKept(a *outputs.Attachment, reason string) int64 {
	a.Location, a.Reason = "preview_only", reason
	k.lost = append(k.lost, a.Name+" ("+reason+")")
	return a.Size
}

// failure is, under preserve required, the failure of outputs that could not be kept.
func (k *keeper) failure(preserveRequired bool) *engine.Failure {
	if len(k.lost) == 0 || !preserveRequired {
		return nil
	}
	return &engine.Failure{Kind: failure.OutputNotPreserved, Executed: true,
		Message: fmt.Sprintf("preserve is required, but %s could not be kept in the blob store", strings.Join(k.lost, "; "))}
}
