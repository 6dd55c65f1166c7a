package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// Webhook tells an operator's URL (approvals.webhook) of each question kept as a pause: one
// POST of {"event": "approval_pending", "approval": {...}} (an Entry, the shape `approvals
// list --json` prints), with the bearer token when one is given. Notices are queued and sent
// one at a time by one goroutine, which Close waits for; a full queue drops a notice (logged)
// rather than hold the call that asked. It is not subject to egress rules: the URL is the
// operator's own.
type Webhook struct {
	url, bearer string
	client      *http.Client
	log         *slog.Logger
	queue       chan Entry
	done        chan struct{}
}

// webhookQueue bounds the notices waiting to be sent; webhookTimeout bounds one POST.
const (
	webhookQueue   = 256
	webhookTimeout = 10 * time.Second
)

// NewWebhook starts the sender of notices to url, with bearer as its token when it is not
// empty, logging to log (nil: slog.Default()). Close stops it.
func NewWebhook(url, bearer string, log *slog.Logger) *Webhook {
	if log == nil {
		log = slog.Default()
	}
	h := &Webhook{url: url, bearer: bearer, client: &http.Client{Timeout: webhookTimeout}, log: log,
		queue: make(chan Entry, webhookQueue), done: make(chan struct{})}
	go h.run()
	return h
}

// Notify queues the notice of e; it never blocks. It is RoomOptions.Notify.
func (h *Webhook) Notify(e Entry) {
	select {
	case h.queue <- e:
	default:
		h.log.Warn("approvals webhook: the queue is full; a notice was dropped", "approval", e.ID, "tenant", e.Tenant)
	}
}

func (h *Webhook) run() {
	defer close(h.done)
	for e := range h.queue {
		if err := h.send(e); err != nil {
			h.log.Warn("approvals webhook: a notice was not delivered", "approval", e.ID, "tenant", e.Tenant, "err", err)
		}
	}
}

func (h *Webhook) send(e Entry) error {
	body, err := json.Marshal(struct {
		Event    string `json:"event"`
		Approval Entry  `json:"approval"`
	}{"approval_pending", e})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), webhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if h.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+h.bearer)
	}
	res, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("the webhook answered %s", res.Status)
	}
	return nil
}

// Close sends what is queued and stops the sender; a nil *Webhook is fine. No Notify may
// follow it.
func (h *Webhook) Close() {
	if h == nil {
		return
	}
	close(h.queue)
	<-h.done
}
