package assembly

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// loadTestConfig reads path as the command does.
func loadTestConfig(path string) (*Config, error) {
	c, err := configs.LoadWith(path, LoadOptions())
	if err != nil {
		return nil, err
	}
	return testConfig(c), nil
}

// TestPausesRetention: approvals.retention_hours (default 72) drops the paused calls asked
// before it, and keeps the younger ones; a retention of 0 is a config error, and so is an
// operator token given in clear or shared with a tenant.
func TestPausesRetention(t *testing.T) {
	cfg, err := loadTestConfig(testkit.WriteConfig(t, "data_dir: \"-\"\napprovals: {retention_hours: 2}\ntenants: {acme: {agents: {default: {}}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Retention(); got != 2*time.Hour {
		t.Errorf("retention %v, want 2h", got)
	}
	if _, err := loadTestConfig(testkit.WriteConfig(t, "approvals: {retention_hours: 0}\ntenants: {acme: {agents: {default: {}}}}\n")); err == nil ||
		!strings.Contains(err.Error(), "approvals.retention_hours") {
		t.Errorf("retention 0: %v", err)
	}
	const hash = "sha256:f25304f25690670ae008ff9c122fbcfb785ec4541a0cad4c6d5591f1cb6de5e6"
	for yaml, want := range map[string]string{
		"approvals: {operator_tokens: [plain-token]}\ntenants: {acme: {agents: {default: {}}}}\n":                                  "never the token itself",
		"approvals: {webhook: {url: \"ftp://ops.example/hook\"}}\ntenants: {acme: {agents: {default: {}}}}\n":                      "approvals.webhook.url",
		"approvals: {operator_tokens: [\"" + hash + "\"]}\ntenants: {acme: {tokens: [\"" + hash + "\"], agents: {default: {}}}}\n": "also tenant acme's token",
	} {
		if _, err := loadTestConfig(testkit.WriteConfig(t, yaml)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", yaml, err, want)
		}
	}
	if ok := operatorTokens([]string{hash}); ok == nil || ok("other") {
		t.Errorf("operatorTokens admits another token")
	}
	if operatorTokens(nil) != nil {
		t.Errorf("without operator tokens the route is served")
	}
	led, err := sqlite.Open(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	now := time.Now()
	for id, asked := range map[string]time.Time{"q_old": now.Add(-3 * time.Hour), "q_young": now.Add(-time.Hour)} {
		if err := led.SavePause(context.Background(), budget.Pause{ID: id, Tenant: "acme", Tool: "x", AskedAt: asked, Expires: asked}); err != nil {
			t.Fatal(err)
		}
	}
	approval.DropOldPauses(context.Background(), led, cfg.Retention())
	if _, err := led.Pause(context.Background(), "q_old"); err == nil {
		t.Errorf("a pause past the retention was kept")
	}
	if _, err := led.Pause(context.Background(), "q_young"); err != nil {
		t.Errorf("a pause within the retention: %v", err)
	}
}
