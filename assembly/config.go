package assembly

import (
	"fmt"
	"sort"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
)

// Env is how this package reaches the process's environment and files: the command hands in
// os.LookupEnv and os.ReadFile, and nothing here reads either by itself. A credential the
// config names is resolved through it each time it is used, so a rotated secret takes effect
// at once.
type Env struct {
	LookupEnv func(name string) (string, bool)
	ReadFile  func(path string) ([]byte, error)
}

func (e Env) getenv(name string) string {
	v, _ := e.LookupEnv(name)
	return v
}

// resolve reads a credential reference (env:NAME or file:PATH) now.
func (e Env) resolve(c configs.Credential) (string, error) { return c.Resolve(e.LookupEnv, e.ReadFile) }

// Config is a config the command has read and validated, with the environment its
// credentials resolve in.
type Config struct {
	*configs.Config
	Env
}

// ConfigError is a mistake in the config or in how the command named a part of it: the
// command exits 2 for it, as for a usage error.
type ConfigError struct{ msg string }

func (e *ConfigError) Error() string { return e.msg }

func configErrorf(format string, args ...any) error {
	return &ConfigError{fmt.Sprintf(format, args...)}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
