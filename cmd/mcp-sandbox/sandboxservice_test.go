package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/remote"
)

func TestSandboxServiceUsage(t *testing.T) {
	stdout, _, code := runCLI(t, "", "sandbox-service", "--help")
	if code != exitOK || !strings.Contains(stdout, "backend: remote") || !strings.Contains(stdout, "/v2/executions/{id}/results") {
		t.Errorf("--help: exit %d\n%s", code, stdout)
	}
	dir := t.TempDir()
	remoteOnly := filepath.Join(dir, "remote.yaml")
	os.WriteFile(remoteOnly, []byte("profiles: {default: {backend: remote, remote: {url: \"https://s.internal\"}}}\ntenants: {t: {agents: {a: {}}}}\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--listen is required"},
		{[]string{"--listen", "0.0.0.0:0"}, "refusing to listen on 0.0.0.0:0 beyond loopback"},
		{[]string{"--listen", "127.0.0.1:0", "--config", remoteOnly}, `profile "default" is remote`},
		{[]string{"--listen", "127.0.0.1:0", "extra"}, "takes no arguments"},
	} {
		_, stderr, code := runCLI(t, "", append([]string{"sandbox-service"}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want 2 saying %q:\n%s", c.args, code, c.want, stderr)
		}
	}
	// A config for the service alone is valid, and serve and run say what it is for.
	serviceOnly := filepath.Join(dir, "service.yaml")
	os.WriteFile(serviceOnly, []byte("profiles: {default: {}}\nsandbox_service: {tokens: []}\n"), 0o644)
	if out, stderr, code := runCLI(t, "", "check", "--config", serviceOnly); code != exitOK {
		t.Errorf("check: exit %d\n%s%s", code, out, stderr)
	}
	for _, args := range [][]string{{"serve", "--config", serviceOnly}, {"run", "--config", serviceOnly, "-"}} {
		if _, stderr, code := runCLI(t, "1", args...); code != exitUsage || !strings.Contains(stderr, "for `mcp-sandbox sandbox-service`") {
			t.Errorf("%v: exit %d\n%s", args, code, stderr)
		}
	}
}

// startService starts the built sandbox-service on a loopback port with a token and returns
// its base URL, the token and the process.
func startService(t *testing.T, extra ...string) (string, string, *exec.Cmd, *testkit.Log) {
	t.Helper()
	const token = "service-test-token"
	cfg := filepath.Join(t.TempDir(), "service.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
profiles:
  default: {backend: local, isolation: process, allow_same_uid: true}
sandbox_service: {tokens: [%q]}
`, configs.HashToken(token))), 0o644)
	cmd := exec.Command(testkit.Binary(t), append([]string{"sandbox-service", "--listen", "127.0.0.1:0", "--config", cfg}, extra...)...)
	log := testkit.NewLog(t, "server")
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := regexp.MustCompile(`msg="serving sandbox executions" addr=(\S+)`)
	var url string
	if !waitFor(30*time.Second, func() bool {
		m := addr.FindStringSubmatch(log.String())
		if m != nil {
			url = "http://" + m[1]
		}
		return m != nil
	}) {
		t.Fatalf("the service did not start:\n%s", log.String())
	}
	return url, token, cmd, log
}

func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The service answers /healthz and /readyz, wants its token, runs a program, and on SIGTERM
// drains: /readyz turns 503, new executions are refused, a running one is cancelled at the
// drain deadline (its caller sees provider_error), and the process exits 0.
func TestSandboxServiceServesAndDrains(t *testing.T) {
	url, token, cmd, log := startService(t, "--drain-timeout", "2s")
	if status(t, url+remote.PathHealth) != http.StatusOK || status(t, url+remote.PathReady) != http.StatusOK {
		t.Fatalf("healthz or readyz not 200")
	}
	if s := status(t, url+remote.PathDescribe); s != http.StatusUnauthorized {
		t.Errorf("describe without a token: %d, want 401", s)
	}
	client, err := remote.New(&remote.Options{URL: url, Bearer: func(context.Context) (string, error) { return token, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if res := client.Run(context.Background(), engine.Execution{Program: "6*7"}); res.Failure != nil || string(res.Value) != "42" {
		t.Fatalf("6*7: %+v %s", res.Failure, res.Value)
	}

	marker := fmt.Sprintf("63.%d", time.Now().UnixNano()%100000)
	running := make(chan *engine.Outcome, 1)
	go func() {
		running <- client.Run(context.Background(), engine.Execution{Program: fmt.Sprintf(
			"import subprocess, time\nsubprocess.Popen(['sleep', '%s'])\ntime.sleep(60)", marker)})
	}()
	if !waitFor(10*time.Second, func() bool { return procsWith("sleep "+marker) > 0 }) {
		t.Fatal("the program's child never started")
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !waitFor(time.Second, func() bool { return status(t, url+remote.PathReady) == http.StatusServiceUnavailable }) {
		t.Errorf("readyz did not turn 503 while draining")
	}
	if res := client.Run(context.Background(), engine.Execution{Program: "1"}); res.Failure == nil || res.Failure.Executed {
		t.Errorf("a new execution while draining: %+v", res.Failure)
	}
	res := <-running
	if res.Failure == nil || res.Failure.Kind != failure.ProviderError {
		t.Errorf("the running execution: %+v", res.Failure)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	case <-time.After(gate.Scaled(15 * time.Second)):
		t.Fatal("the service did not exit within 15 s of SIGTERM")
	}
	t.Logf("exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	if !waitFor(5*time.Second, func() bool { return procsWith("sleep "+marker) == 0 }) {
		t.Errorf("processes of the running program outlived the service")
	}
	if !strings.Contains(log.String(), "outcome=cancelled") {
		t.Errorf("the running execution did not end as cancelled in the service's log")
	}
}

// A server whose remote profile's service is not up yet is not ready, and becomes ready when
// the service starts answering (Kubernetes starts both Deployments at once).
func TestServeReadyWhenItsServiceComesUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: "-"
profiles:
  far: {backend: remote, isolation: process, remote: {url: "http://%s", bearer: {env: SANDBOX_TOKEN}}}
tenants:
  t: {agents: {default: {code_execution: {profile: far}}}}
`, addr))
	base := startHTTPEnv(t, cfg, []string{"SANDBOX_TOKEN=service-test-token"})
	if s := status(t, base+"/readyz"); s != http.StatusServiceUnavailable {
		t.Fatalf("readyz with the service down: %d, want 503", s)
	}
	startService(t, "--listen", addr)
	start := time.Now()
	if !waitFor(30*time.Second, func() bool { return status(t, base+"/readyz") == http.StatusOK }) {
		t.Fatal("readyz stayed 503 after the service came up")
	}
	t.Logf("ready %v after the service came up", time.Since(start).Round(time.Millisecond))
}
