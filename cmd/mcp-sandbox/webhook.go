package main

import (
	"log/slog"
	"os"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
)

// startWebhook starts the sender of cfg's approvals.webhook (approval.Webhook), its bearer
// read here, or returns nil without one.
func startWebhook(cfg *configs.Config) (*approval.Webhook, error) {
	w := cfg.Approvals.Webhook
	if w == nil {
		return nil, nil
	}
	var bearer string
	if w.Bearer != nil {
		b, err := w.Bearer.Resolve(os.LookupEnv, os.ReadFile)
		if err != nil {
			return nil, usagef("approvals.webhook.bearer: %v", err)
		}
		bearer = b
	}
	return approval.NewWebhook(w.URL, bearer, slog.Default()), nil
}
