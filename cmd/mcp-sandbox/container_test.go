//go:build linux

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/container"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// containerConfig: one profile on the container backend, required to reach isolated.
const containerConfig = `
data_dir: "-"
profiles:
  boxed:
    backend: container
    isolation: isolated
    container: {image: localhost/mcp-sandbox-python:latest}
tenants:
  t1:
    agents:
      a: {code_execution: {profile: boxed, isolation: isolated}}
`

// requireContainer skips unless a runtime answers and the default image is present (`make
// sandbox-image`, which runs `mcp-sandbox image build`), and returns the runtime's kind.
func requireContainer(t *testing.T) string {
	t.Helper()
	d := container.Detect(context.Background(), &container.Options{})
	gate.Require(t, "container", d.Available, d.Reason)
	return d.Runtime.Kind
}

func allEnforced(t *testing.T, g map[string]string) {
	t.Helper()
	if len(g) != 10 {
		t.Errorf("%d guarantees graded, want 10: %v", len(g), g)
	}
	for dim, grade := range g {
		if grade != "enforced" {
			t.Errorf("%s is %s in a container", dim, grade)
		}
	}
}

// `run` and `serve` on the container backend return 6*7, graded isolated with every
// guarantee enforced, and doctor lists the backend and the profile ready.
func TestContainerRunServeDoctor(t *testing.T) {
	requireContainer(t)
	cfg := testkit.WriteConfig(t, containerConfig)

	out, errOut, code := runCLI(t, "6*7", "run", "--config", cfg, "-")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	var ran struct {
		Value      json.RawMessage   `json:"value"`
		Isolation  string            `json:"isolation"`
		Guarantees map[string]string `json:"guarantees"`
	}
	if err := json.Unmarshal([]byte(out), &ran); err != nil || string(ran.Value) != "42" || ran.Isolation != "isolated" {
		t.Fatalf("run: %v: %s", err, out)
	}
	allEnforced(t, ran.Guarantees)

	cs := connectStdio(t, []string{"--config", cfg}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(60*time.Second))
	defer cancel()
	res, r := runCode(t, ctx, cs, "6*7", nil)
	if res.IsError || string(r.Value) != "42" {
		t.Fatalf("serve: isError %v, value %s, failure %+v, text %s", res.IsError, r.Value, r.Failure, testkit.Text(res))
	}
	allEnforced(t, r.Guarantees)

	out, errOut, code = runCLI(t, "", "doctor", "--json", "--config", cfg)
	if code != 0 {
		t.Fatalf("doctor: exit %d\n%s\n%s", code, out, errOut)
	}
	var rep struct {
		Backends []struct {
			Name      string `json:"name"`
			Available bool   `json:"available"`
		} `json:"backends"`
		Profiles []struct {
			Description struct {
				Backend    string   `json:"backend"`
				Ready      bool     `json:"ready"`
				Isolation  string   `json:"isolation"`
				Mechanisms []string `json:"mechanisms"`
			} `json:"description"`
		} `json:"profiles"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	listed := false
	for _, b := range rep.Backends {
		listed = listed || b.Name == "container" && b.Available
	}
	if !listed {
		t.Errorf("doctor does not list the container backend as available: %+v", rep.Backends)
	}
	if len(rep.Profiles) != 1 || rep.Profiles[0].Description.Backend != "container" || !rep.Profiles[0].Description.Ready ||
		rep.Profiles[0].Description.Isolation != "isolated" {
		t.Errorf("doctor's profile: %+v", rep.Profiles)
	}
}

// A container profile whose image is not there: doctor says what to run, and exits non-zero.
func TestContainerDoctorMissingImage(t *testing.T) {
	kind := requireContainer(t)
	cfg := testkit.WriteConfig(t, `
data_dir: "-"
profiles:
  boxed: {backend: container, isolation: isolated, container: {image: "localhost/mcp-sandbox-absent:never"}}
tenants: {t1: {agents: {a: {code_execution: {profile: boxed}}}}}
`)
	out, _, code := runCLI(t, "", "doctor", "--config", cfg)
	if code == 0 {
		t.Fatalf("doctor exited 0 with the image missing:\n%s", out)
	}
	for _, want := range []string{"container   isolated  unavailable: the image localhost/mcp-sandbox-absent:never", `"` + kind + ` pull localhost/mcp-sandbox-absent:never"`, "NOT READY"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor's report lacks %q:\n%s", want, out)
		}
	}
}
