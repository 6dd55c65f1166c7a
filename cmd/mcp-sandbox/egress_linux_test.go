//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// `run` under a profile's network rules, end to end: the program reaches the allowed origin
// through the proxy by plain HTTP, a name and an address no rule allows are refused with a
// 403 it can read, and the result's network block lists them.
func TestRunNetworkRules(t *testing.T) {
	ok, why := namespaces.Available(&namespaces.Options{})
	gate.Require(t, "namespaces", ok, why)
	var hits atomic.Int32
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintf(w, "plain hello %s", r.URL.Path)
	}))
	defer origin.Close()
	host := strings.TrimPrefix(origin.URL, "http://")
	port := host[strings.LastIndexByte(host, ':')+1:]
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
profiles: {default: {backend: namespaces, isolation: isolated, network: {allow: ["%s", "http://docs.example.test:%s/v1/ GET"]}}}
tenants: {local: {agents: {default: {code_execution: {isolation: isolated, network: rules}}}}}
`, host, port))
	prog := fmt.Sprintf(`
import urllib.request, urllib.error
def get(u):
    try:
        return urllib.request.urlopen(u, timeout=120).read().decode()
    except urllib.error.HTTPError as e:
        return "%%d %%s" %% (e.code, e.read().decode())
[get("http://%s/ok"), get("http://other.example.test:%s/"), get("http://127.0.0.2:%s/")]
`, host, port, port)
	out, errOut, code := runCLI(t, prog, "run", "--config", cfg, "-")
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	var res struct {
		Value   []string `json:"value"`
		Network *struct {
			Allowed int `json:"allowed"`
			Refused []struct {
				Host   string `json:"host"`
				Reason string `json:"reason"`
			} `json:"refused"`
		} `json:"network"`
		Terms struct {
			Network string `json:"network"`
		} `json:"terms"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(res.Value) != 3 || res.Value[0] != "plain hello /ok" ||
		!strings.HasPrefix(res.Value[1], "403 ") || !strings.Contains(res.Value[1], "not_allowed") ||
		!strings.HasPrefix(res.Value[2], "403 ") || !strings.Contains(res.Value[2], "ip_literal") {
		t.Errorf("value %q", res.Value)
	}
	if res.Terms.Network != "rules" || res.Network == nil || res.Network.Allowed != 1 || len(res.Network.Refused) != 2 ||
		res.Network.Refused[0].Host != "other.example.test" || res.Network.Refused[1].Reason != "ip_literal" {
		t.Errorf("terms.network %q, network %+v", res.Terms.Network, res.Network)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the origin was reached %d times, want once", n)
	}
}

// boxServer is a minimal MCP server over stdio, by hand in Python (nothing to install), whose
// one tool reports what it can reach: a file in the host's home, a loopback listener of the
// host's, and the processes it can see.
const boxServer = `# TOKEN
import json, os, socket, sys, urllib.request
def probe():
    out = {"ppid": os.getppid(), "procs": len([n for n in os.listdir("/proc") if n.isdigit()])}
    try:
        open(HOME_FILE).read()
        out["home_file"] = "readable"
    except FileNotFoundError:
        out["home_file"] = "absent"
    except OSError:
        out["home_file"] = "unreadable"
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=60).close()
        out["connect"] = "connected"
    except OSError as e:
        out["connect"] = "refused: " + type(e).__name__
    if os.environ.get("PROBE_URL"):
        try:
            out["fetched"] = urllib.request.urlopen(os.environ["PROBE_URL"], timeout=120).read().decode()
        except Exception as e:
            out["fetched"] = repr(e)
    return out
while True:
    line = sys.stdin.readline()
    if not line:
        break
    msg = json.loads(line)
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        res = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
               "serverInfo": {"name": "box", "version": "1"}}
    elif method == "tools/list":
        res = {"tools": [{"name": "probe", "description": "what the server can reach", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        p = probe()
        res = {"content": [{"type": "text", "text": json.dumps(p)}], "structuredContent": p}
    elif method == "ping":
        res = {}
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": method}}) + "\n")
        sys.stdout.flush()
        continue
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": res}) + "\n")
    sys.stdout.flush()
`

// Issue 28, must show 3: an upstream stdio server under sandbox: with network none cannot read
// a file the test places in the host's home, cannot connect out, and still answers its tool;
// when the session ends, nothing of it survives.
func TestUpstreamContained(t *testing.T) {
	ok, why := namespaces.Available(&namespaces.Options{})
	gate.Require(t, "namespaces", ok, why)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	secret, err := os.CreateTemp(home, "mcp-sandbox-upstream-canary-")
	if err != nil {
		gate.Require(t, "home", false, fmt.Sprintf("cannot place a file in the home directory: %v", err))
	}
	secret.WriteString("the host's own file\n")
	secret.Close()
	os.Chmod(secret.Name(), 0o644)
	defer os.Remove(secret.Name())
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	token := fmt.Sprintf("box-server-%d-%d", os.Getpid(), time.Now().UnixNano())
	script := strings.NewReplacer("TOKEN", token, "HOME_FILE", strconv.Quote(secret.Name()),
		"PORT", fmt.Sprint(l.Addr().(*net.TCPAddr).Port)).Replace(boxServer)
	quoted, _ := json.Marshal(script)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
profiles:
  default: {}
  boxed: {backend: namespaces, isolation: isolated}
upstreams:
  box: {command: ["/usr/bin/python3", "-c", %s], sandbox: boxed}
tenants: {local: {upstreams: [box], agents: {default: {code_execution: {}}}}}
`, quoted))
	out, errOut, code := runCLI(t, "await box__probe()", "run", "--log-level", "info", "--config", cfg, "-")
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	var res struct {
		Value map[string]any `json:"value"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("the server saw %v", res.Value)
	if res.Value["home_file"] == "readable" || !strings.HasPrefix(fmt.Sprint(res.Value["connect"]), "refused") {
		t.Errorf("the contained server reached the host: %v", res.Value)
	}
	if res.Value["ppid"] != float64(1) || res.Value["procs"].(float64) > 2 {
		t.Errorf("the server sees parent %v and %v processes, want its own pid namespace (parent 1, the sandbox's init, and itself)",
			res.Value["ppid"], res.Value["procs"])
	}
	l.(*net.TCPListener).SetDeadline(time.Now())
	if c, err := l.Accept(); err == nil {
		c.Close()
		t.Error("the contained server connected to the host's listener")
	}
	// run has exited and closed its session: no process of the server may be left.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(token)) {
			t.Errorf("a process of the server outlived its session: %s", p)
		}
	}
}

// A contained upstream under its profile's network rules reaches what they allow through an
// egress proxy of its own, and nothing else.
func TestUpstreamContainedWithRules(t *testing.T) {
	ok, why := namespaces.Available(&namespaces.Options{})
	gate.Require(t, "namespaces", ok, why)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "plain hello %s", r.URL.Path)
	}))
	defer origin.Close()
	host := strings.TrimPrefix(origin.URL, "http://")
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	script := strings.NewReplacer("TOKEN", "rules", "HOME_FILE", strconv.Quote("/nonexistent"),
		"PORT", fmt.Sprint(l.Addr().(*net.TCPAddr).Port)).Replace(boxServer)
	quoted, _ := json.Marshal(script)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
profiles:
  default: {}
  boxed: {backend: namespaces, isolation: isolated, network: {allow: ["%s"]}}
upstreams:
  box: {command: ["/usr/bin/python3", "-c", %s], env: {PROBE_URL: "http://%s/x"}, sandbox: boxed}
tenants: {local: {upstreams: [box], agents: {default: {code_execution: {}}}}}
`, host, quoted, host))
	out, errOut, code := runCLI(t, "await box__probe()", "run", "--log-level", "info", "--config", cfg, "-")
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	var res struct {
		Value map[string]any `json:"value"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("the server saw %v", res.Value)
	if res.Value["fetched"] != "plain hello /x" || !strings.HasPrefix(fmt.Sprint(res.Value["connect"]), "refused") {
		t.Errorf("the server saw %v: want the allowed origin through the proxy and no other route", res.Value)
	}
	l.(*net.TCPListener).SetDeadline(time.Now())
	if c, err := l.Accept(); err == nil {
		c.Close()
		t.Error("the contained server connected to the host's listener")
	}
}
