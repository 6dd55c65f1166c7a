package main

import (
	"maps"
	"os"
	"slices"

	"github.com/mcp-sandbox/mcp-sandbox/assembly"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
)

// processEnv is this process's environment and files, as package assembly reads them: the
// credentials a config names resolve through it, each time they are used.
var processEnv = assembly.Env{LookupEnv: os.LookupEnv, ReadFile: os.ReadFile}

// loadConfig reads path, or the embedded default when path is empty.
func loadConfig(path string) (*assembly.Config, error) {
	if path == "" {
		return &assembly.Config{Config: configs.Default(), Env: processEnv}, nil
	}
	cfg, err := configs.LoadWith(path, assembly.LoadOptions())
	if err != nil {
		return nil, usagef("%v", err)
	}
	return &assembly.Config{Config: cfg, Env: processEnv}, nil
}

// reloadConfig is serve's re-read of path at SIGHUP; nil for the embedded default, which
// cannot change.
func reloadConfig(path string) func() (*assembly.Config, error) {
	if path == "" {
		return nil
	}
	return func() (*assembly.Config, error) { return loadConfig(path) }
}

// errNoTenant: a config valid for sandbox-service alone has nothing to serve or run.
var errNoTenant = usagef("the config defines no tenant; a config with only sandbox_service is for `mcp-sandbox sandbox-service`")

// pickTenant resolves --tenant, defaulting to the only one there is.
func pickTenant(cfg *assembly.Config, tenant string) (string, error) {
	if len(cfg.Tenants) == 0 {
		return "", errNoTenant
	}
	names := slices.Sorted(maps.Keys(cfg.Tenants))
	if tenant == "" {
		if len(names) != 1 {
			return "", usagef("--tenant is required: the config has tenants %v", names)
		}
		tenant = names[0]
	}
	if _, ok := cfg.Tenants[tenant]; !ok {
		return "", usagef("no tenant %q in the config (tenants: %v)", tenant, names)
	}
	return tenant, nil
}

// pickAgent resolves --tenant and --agent, each defaulting to the only one there is.
func pickAgent(cfg *assembly.Config, tenant, agent string) (string, string, error) {
	tenant, err := pickTenant(cfg, tenant)
	if err != nil {
		return "", "", err
	}
	t := cfg.Tenants[tenant]
	names := slices.Sorted(maps.Keys(t.Agents))
	if agent == "" {
		if len(names) != 1 {
			return "", "", usagef("--agent is required: tenant %q has agents %v", tenant, names)
		}
		agent = names[0]
	}
	if _, ok := t.Agents[agent]; !ok {
		return "", "", usagef("tenant %q has no agent %q (agents: %v)", tenant, agent, names)
	}
	return tenant, agent, nil
}
