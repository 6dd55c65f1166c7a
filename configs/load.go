package configs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// maxFileBytes bounds one config or tenant file: far above any real config, far below harm.
const maxFileBytes = 8 << 20

// Parse decodes, fills defaults and validates one config document. source names it in
// messages ("default.yaml:7: …"). Relative paths in it are left as written; tenants_dir is
// recorded but not read (Load reads it). Any error is a *failure.Error of kind ConfigInvalid
// whose Err is Problems. When decoding fails (unknown key, wrong type, bad YAML) only those
// problems are reported, since validating a half-decoded config would add misleading ones.
func Parse(data []byte, source string) (*Config, error) {
	c, m, ps := decodeConfig(data, source)
	if len(ps) > 0 {
		return nil, ps.asError(source)
	}
	return finish(c, m, source)
}

// Options are what a program that loads a config knows and the config schema does not.
type Options struct {
	// Backends are the profile backends this build can run; a profile naming another one
	// the schema knows (container, remote) is a problem. Nil means every backend the schema
	// names.
	Backends []string
}

// LoadWith is Load, validating against what this build has (o; nil is Load).
func LoadWith(path string, o *Options) (*Config, error) {
	if o == nil {
		o = &Options{}
	}
	return load(path, *o)
}

// Load reads, decodes and validates the config file at path, then the files of its
// tenants_dir, if any. Relative data_dir, tenants_dir, bearer file paths and command paths
// (a relative command[0] containing a slash, like "./bin/server") are taken against the
// directory of path, so a config means the same whatever the working directory of the
// process reading it; a bare command name ("npx") is left for PATH.
//
// To pick up changed tenant files (SIGHUP), call Load again: the result is a new Config, and
// the old one stays valid for whoever still holds it.
func Load(path string) (*Config, error) { return load(path, Options{}) }

func load(path string, o Options) (*Config, error) {
	data, err := readBounded(path)
	if err != nil {
		return nil, failure.Wrap(failure.ConfigInvalid, err, "cannot read config")
	}
	c, m, ps := decodeConfig(data, path)
	if len(ps) > 0 {
		return nil, ps.asError(path)
	}
	m.backends = o.Backends
	c.resolvePaths(filepath.Dir(path))
	if c.TenantsDir != "" {
		tenants, files, tps := loadTenantsDir(c.TenantsDir, m.pos)
		ps = append(ps, tps...)
		for name, t := range tenants {
			if _, dup := c.Tenants[name]; dup {
				ps = append(ps, m.problem(keyPath("tenants", name), "tenant %q is defined both here and in %s", name, files[name]))
				continue
			}
			if c.Tenants == nil {
				c.Tenants = map[string]Tenant{}
			}
			c.Tenants[name] = t
		}
		if len(ps) > 0 {
			return nil, ps.asError(path)
		}
	}
	return finish(c, m, path)
}

func finish(c *Config, m *meta, source string) (*Config, error) {
	c = c.withDefaults()
	if err := validate(c, m).asError(source); err != nil {
		return nil, err
	}
	return c, nil
}

// LoadTenantsDir reads every DIR/<tenant>.yaml, each holding one tenant's block, strictly and
// with defaults filled. Files whose names start with "." and files with other extensions are
// ignored, except ".yml", which is an error rather than a tenant silently missing.
// Cross-references (profiles, upstreams, tokens shared between tenants) need the whole config
// and are checked by Load and Validate.
func LoadTenantsDir(dir string) (map[string]Tenant, error) {
	tenants, _, ps := loadTenantsDir(dir, map[string]position{})
	if err := ps.asError(""); err != nil {
		return nil, err
	}
	for name, t := range tenants {
		tenants[name] = withTenantDefaults(t)
	}
	return tenants, nil
}

// loadTenantsDir decodes the tenant files of dir, recording positions in pos, and returns the
// tenants with the file each came from.
func loadTenantsDir(dir string, pos map[string]position) (map[string]Tenant, map[string]string, Problems) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, Problems{{Source: dir, Path: "tenants_dir", Message: fmt.Sprintf("cannot read tenants directory: %v", err)}}
	}
	tenants, files := map[string]Tenant{}, map[string]string{}
	var ps Problems
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		file := filepath.Join(dir, name)
		switch filepath.Ext(name) {
		case ".yaml":
		case ".yml":
			ps = append(ps, Problem{Source: file, Message: "tenant files are named <tenant>.yaml; rename this file or it will never be read"})
			continue
		default:
			continue
		}
		tenant := strings.TrimSuffix(name, ".yaml")
		data, err := readBounded(file)
		if err != nil {
			ps = append(ps, Problem{Source: file, Message: fmt.Sprintf("cannot read: %v", err)})
			continue
		}
		sub := map[string]position{}
		t, tps := decodeTenant(data, file, tenant, sub)
		ps = append(ps, tps...)
		// The main file's position of tenants.<name>, if any, survives for the conflict
		// message; the tenant file's positions win for everything below it.
		for k, v := range sub {
			if _, ok := pos[k]; ok && k == keyPath("tenants", tenant) {
				continue
			}
			pos[k] = v
		}
		tenants[tenant], files[tenant] = t, file
	}
	return tenants, files, ps
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxFileBytes)
	}
	return data, nil
}

// resolvePaths makes the relative paths of a freshly decoded c relative to base instead.
func (c *Config) resolvePaths(base string) {
	join := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	if c.DataDir != NoDataDir {
		c.DataDir = join(c.DataDir)
	}
	c.TenantsDir = join(c.TenantsDir)
	if c.Ledger != nil && c.Ledger.Postgres != nil && c.Ledger.Postgres.DSN.File != "" {
		p := *c.Ledger.Postgres
		p.DSN.File = join(p.DSN.File)
		c.Ledger = &Ledger{Postgres: &p}
	}
	if c.Blobs != nil && c.Blobs.Postgres != nil && c.Blobs.Postgres.DSN.File != "" {
		p := *c.Blobs.Postgres
		p.DSN.File = join(p.DSN.File)
		c.Blobs = &Blobs{Postgres: &p}
	}
	remoteBearer := func(p *Profile) {
		if p.Remote != nil {
			r := *p.Remote
			r.Bearer = joinCredential(r.Bearer, join)
			p.Remote = &r
		}
	}
	for name, p := range c.Profiles {
		remoteBearer(&p)
		c.Profiles[name] = p
	}
	if c.Sandbox != nil {
		p := *c.Sandbox
		remoteBearer(&p)
		c.Sandbox = &p
	}
	for name, u := range c.Upstreams {
		if len(u.Command) > 0 && strings.ContainsRune(u.Command[0], '/') {
			u.Command = append([]string{join(u.Command[0])}, u.Command[1:]...)
		}
		u.Bearer = joinCredential(u.Bearer, join)
		if u.A2A != nil {
			a := *u.A2A
			a.Bearer = joinCredential(a.Bearer, join)
			u.A2A = &a
		}
		c.Upstreams[name] = u
	}
}

// joinCredential returns c with a relative file made relative to base by join; c is not
// modified.
func joinCredential(c *Credential, join func(string) string) *Credential {
	if c == nil || c.File == "" {
		return c
	}
	b := *c
	b.File = join(b.File)
	return &b
}

// DefaultDataDir is where data_dir "" points: $XDG_STATE_HOME/mcp-sandbox, else
// $HOME/.local/state/mcp-sandbox. A relative XDG_STATE_HOME is ignored, as the XDG spec says.
// It returns "" when neither is usable; the caller decides what that means.
func DefaultDataDir(getenv func(string) string) string {
	if x := getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "mcp-sandbox")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "mcp-sandbox")
	}
	return ""
}
