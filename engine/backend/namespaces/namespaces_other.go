//go:build !linux

package namespaces

import (
	"context"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
)

// Available reports that the namespaces backend does not run here, and why.
func Available(*Options) (bool, string) { return false, spawned.Absent("namespaces") }

// New refuses off Linux, saying why (spawned.Absent).
func New(context.Context, *Options) (engine.Backend, error) {
	return nil, spawned.Unavailable("namespaces")
}

// TemplateWhy: off Linux there is no backend to fork from templates.
func TemplateWhy(context.Context, *Options) string { return spawned.Absent("namespaces") }
