package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
)

// webhook tells approvals.webhook of each new pending approval: one POST of
// {"event": "approval_pending", "approval": {...}} (the shape `approvals list --json` prints),
// with the bearer token when one is configured. Notices are queued and sent one at a time by
// one goroutine, which close waits for; a full queue drops a notice (logged) rather than hold
// the program that asked.
type webhook struct {
	url, bearer string
	client      *http.Client
	queue       chan mcpserver.Approval
	done        chan struct{}
}

// webhookQueue bounds the notices waiting to be sent; webhookTimeout bounds one POST.
const (
	webhookQueue   = 256
	webhookTimeout = 10 * time.Second
)

// startWebhook starts the sender of cfg's approvals.webhook, or returns nil without one.
func startWebhook(cfg *configs.Config) (*webhook, error) {
	w := cfg.Approvals.Webhook
	if w == nil {
		return nil, nil
	}
	h := &webhook{url: w.URL, client: &http.Client{Timeout: webhookTimeout},
		queue: make(chan mcpserver.Approval, webhookQueue), done: make(chan struct{})}
	if w.Bearer != nil {
		b, err := w.Bearer.Resolve(os.LookupEnv, os.ReadFile)
		if err != nil {
			return nil, usagef("approvals.webhook.bearer: %v", err)
		}
		h.bearer = b
	}
	go h.run()
	return h, nil
}

// notify queues the notice of a; it never blocks.
func (h *webhook) notify(a mcpserver.Approval) {
	select {
	case h.queue <- a:
	default:
		slog.Warn("approvals webhook: the queue is full; a notice was dropped", "approval", a.ID, "tenant", a.Tenant)
	}
}

func (h *webhook) run() {
	defer close(h.done)
	for a := range h.queue {
		if err := h.send(a); err != nil {
			slog.Warn("approvals webhook: a notice was not delivered", "approval", a.ID, "tenant", a.Tenant, "err", err)
		}
	}
}

func (h *webhook) send(a mcpserver.Approval) error {
	body, err := json.Marshal(struct {
		Event    string             `json:"event"`
		Approval mcpserver.Approval `json:"approval"`
	}{"approval_pending", a})
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

// close sends what is queued and stops the sender; nil is fine.
func (h *webhook) close() {
	if h == nil {
		return
	}
	close(h.queue)
	<-h.done
}
