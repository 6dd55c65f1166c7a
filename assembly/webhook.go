package assembly

import (
	"log/slog"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
)

// startWebhook starts the sender of cfg's approvals.webhook (approval.Webhook), its bearer
// read here, or returns nil without one.
func startWebhook(cfg *Config) (*approval.Webhook, error) {
	w := cfg.Approvals.Webhook
	if w == nil {
		return nil, nil
	}
	var bearer string
	if w.Bearer != nil {
		b, err := cfg.resolve(*w.Bearer)
		if err != nil {
			return nil, configErrorf("approvals.webhook.bearer: %v", err)
		}
		bearer = b
	}
	return approval.NewWebhook(w.URL, bearer, slog.Default()), nil
}
