package approval

import (
	"context"
	"log/slog"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// DropOldPauses drops the paused calls asked longer than retention ago
// (approvals.retention_hours): their questions have long closed, and their journals are kept
// no longer. A server runs it periodically.
func DropOldPauses(ctx context.Context, p budget.Pauses, retention time.Duration) {
	if n, err := p.DropPausesBefore(ctx, time.Now().Add(-retention)); err != nil && ctx.Err() == nil {
		slog.Warn("paused calls past their retention not dropped", "err", err)
	} else if n > 0 {
		slog.Info("paused calls past their retention dropped", "dropped", n, "retention", retention)
	}
}
