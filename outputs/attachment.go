package outputs

// Attachment is one kept output: a stream or an artifact of an execution, or a binding
// call's result kept under a handle. It is the one shape of an attachment, in a result's
// attachments and artifacts (docs/design.md §3.4) and in the ledger's records of calls and
// executions.
type Attachment struct {
	Name        string `json:"name"`
	Handle      string `json:"handle,omitempty"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	Truncated   bool   `json:"truncated"`
	// Location is inline (whole in the result), blob (kept under Handle) or preview_only.
	Location string `json:"location"`
	// Reason says why an attachment that was meant to be kept is preview_only (no blob store,
	// the tenant's stored-bytes quota, the store failing); empty otherwise.
	Reason string `json:"reason,omitempty"`
	// Text is an artifact's whole content when it is text of at most the output preview size,
	// so a model reads a small file without another call (Location is then inline; a Handle
	// may still name the kept copy). Absent otherwise.
	Text *string `json:"text,omitempty"`
}
