package assembly

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/cassette"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
)

// ConfigSecrets are the values of every credential the config names (resolved now, as the
// servers using them would) and the literal env values of command upstreams: what a cassette
// must never contain. A credential that does not resolve has no value to hide.
func ConfigSecrets(cfg *Config) []string {
	var out []string
	credType := reflect.TypeFor[configs.Credential]()
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			if v.Type() == credType {
				if s, err := cfg.resolve(v.Interface().(configs.Credential)); err == nil {
					out = append(out, s)
				}
				return
			}
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			for _, k := range v.MapKeys() {
				walk(v.MapIndex(k))
			}
		}
	}
	walk(reflect.ValueOf(cfg.Config))
	for _, u := range cfg.Upstreams {
		for _, val := range u.Env {
			// A short literal (a flag like "1") is no secret, and scrubbing it would maul the file.
			if len(val) >= minEnvSecret {
				out = append(out, val)
			}
		}
	}
	// The longest first, so a secret containing another is replaced whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out)
}

// minEnvSecret is the least length of an upstream's literal env value scrubbed from a cassette.
const minEnvSecret = 8

// CassetteKeeper is serve's keeper when cassettes.record is on, else nil: each execution's
// cassette kept in the ledger, hiding the config's secrets as they resolve at its start.
func CassetteKeeper(cfg *Config, l budget.Ledger) (execution.CassetteKeeper, error) {
	if !cfg.Cassettes.Record {
		return nil, nil
	}
	return cassette.NewKeeper(l, func() []string { return ConfigSecrets(cfg) }, cfg.CassetteKeptBytes(), slog.Default()), nil
}

// cassetteSweepInterval is how often serve removes the cassettes older than the retention.
const cassetteSweepInterval = time.Hour

// sweepCassettes removes, at once and then every retention (at most cassetteSweepInterval)
// until ctx ends, the cassettes kept longer than retention by the clock now; replicas
// sweeping at once remove each once.
func sweepCassettes(ctx context.Context, store budget.Cassettes, retention time.Duration, now func() time.Time) {
	everyUntilDone(ctx, min(cassetteSweepInterval, retention), func() {
		n, err := store.SweepCassettes(ctx, now().Add(-retention))
		switch {
		case err != nil && ctx.Err() == nil:
			slog.Warn("cassette sweep failed", "err", err)
		case n > 0:
			slog.Info("cassettes swept", "removed", n, "retention", retention)
		}
	})
}
