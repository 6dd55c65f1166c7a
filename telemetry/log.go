package telemetry

import (
	"context"
	"log/slog"
)

type loggerKey struct{}

// WithLogger returns ctx carrying l: the logger of one execution, whose every line names the
// execution, its tenant, agent and Run.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// Logger returns the logger ctx carries, or fallback when it carries none.
func Logger(ctx context.Context, fallback *slog.Logger) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok && l != nil {
		return l
	}
	return fallback
}
