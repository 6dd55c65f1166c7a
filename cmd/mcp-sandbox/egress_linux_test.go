//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/egress"
	"github.com/mcp-sandbox/mcp-sandbox/egress/egresstest"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/bwrap"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// `run` under a profile's network rules, end to end: the program reaches the allowed origin
// through the proxy by plain HTTP, a name and an address no rule allows are refused with a
// 403 it can read, and the result's network block lists them.
func TestRunNetworkRules(t *testing.T) {
	requireNamespaces(t)
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
    if os.environ.get("PROBE_RO"):
        ro = os.environ["PROBE_RO"]
        try:
            out["ro_read"] = open(ro + "/in.txt").read()
        except OSError as e:
            out["ro_read"] = "error: " + type(e).__name__
        try:
            open(ro + "/new.txt", "w").write("x")
            out["ro_write"] = "written"
        except OSError as e:
            out["ro_write"] = "refused: " + type(e).__name__
        out["beside"] = os.path.exists(os.path.dirname(ro) + "/beside.txt")
    if os.environ.get("PROBE_RW"):
        try:
            open(os.environ["PROBE_RW"] + "/out.txt", "w").write("from the box")
            out["rw_write"] = "written"
        except OSError as e:
            out["rw_write"] = "refused: " + type(e).__name__
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
	requireNamespaces(t)
	upstreamContained(t, "namespaces")
}

// The same under the bwrap backend.
func TestUpstreamContainedBwrap(t *testing.T) {
	_, why := bwrap.Find(&bwrap.Options{})
	gate.Require(t, "bwrap", why == "", why)
	upstreamContained(t, "bwrap")
}

// requireNamespaces skips the test, naming why, where the namespaces backend is not available.
func requireNamespaces(t *testing.T) {
	t.Helper()
	ok, why := namespaces.Available(&namespaces.Options{})
	gate.Require(t, "namespaces", ok, why)
}

// boxScript is boxServer with its token, the host file it tries to read and the host port it
// tries to connect to filled in, quoted for a config's command.
func boxScript(token, homeFile, port string) string {
	script := strings.NewReplacer("TOKEN", token, "HOME_FILE", strconv.Quote(homeFile), "PORT", port).Replace(boxServer)
	quoted, _ := json.Marshal(script)
	return string(quoted)
}

// hostListener is a listener of the host's on loopback, closed when the test ends, and its
// port: what a contained server must not reach.
func hostListener(t *testing.T) (*net.TCPListener, string) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.(*net.TCPListener), fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// wantNoConnection fails the test if a connection waits in l's backlog: called once the
// server that might have made one has exited.
func wantNoConnection(t *testing.T, l *net.TCPListener) {
	t.Helper()
	l.SetDeadline(time.Now())
	if c, err := l.Accept(); err == nil {
		c.Close()
		t.Error("the contained server connected to the host's listener")
	}
}

// probeBox runs a program calling box__probe under cfg and returns what the server saw.
func probeBox(t *testing.T, cfg string) map[string]any {
	t.Helper()
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
	return res.Value
}

func upstreamContained(t *testing.T, backend string) {
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
	l, port := hostListener(t)
	token := fmt.Sprintf("box-server-%d-%d", os.Getpid(), time.Now().UnixNano())
	quoted := boxScript(token, secret.Name(), port)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
profiles:
  default: {}
  boxed: {backend: %s, isolation: isolated}
upstreams:
  box: {command: ["/usr/bin/python3", "-c", %s], sandbox: boxed}
tenants: {local: {upstreams: [box], agents: {default: {code_execution: {}}}}}
`, backend, quoted))
	v := probeBox(t, cfg)
	if v["home_file"] == "readable" || !strings.HasPrefix(fmt.Sprint(v["connect"]), "refused") {
		t.Errorf("the contained server reached the host: %v", v)
	}
	// Its own pid namespace: under namespaces, the sandbox's init (1) and itself; under bwrap
	// (--as-pid-1) itself as pid 1, its parent outside the namespace (0).
	if pp := v["ppid"]; pp != float64(1) && pp != float64(0) || v["procs"].(float64) > 2 {
		t.Errorf("the server sees parent %v and %v processes, want its own pid namespace (its init, if any, and itself)",
			v["ppid"], v["procs"])
	}
	wantNoConnection(t, l)
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
	requireNamespaces(t)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "plain hello %s", r.URL.Path)
	}))
	defer origin.Close()
	host := strings.TrimPrefix(origin.URL, "http://")
	l, port := hostListener(t)
	quoted := boxScript("rules", "/nonexistent", port)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
profiles:
  default: {}
  boxed: {backend: namespaces, isolation: isolated, network: {allow: ["%s"]}}
upstreams:
  box: {command: ["/usr/bin/python3", "-c", %s], env: {PROBE_URL: "http://%s/x"}, sandbox: boxed}
tenants: {local: {upstreams: [box], agents: {default: {code_execution: {}}}}}
`, host, quoted, host))
	v := probeBox(t, cfg)
	if v["fetched"] != "plain hello /x" || !strings.HasPrefix(fmt.Sprint(v["connect"]), "refused") {
		t.Errorf("the server saw %v: want the allowed origin through the proxy and no other route", v)
	}
	wantNoConnection(t, l)
}

// Issue 28: every decision of the proxy is kept in the run ledger with the execution, and the
// credential never is. `run` under rules with a header credential for a local HTTPS origin
// (its CA given to the host as its system roots, SSL_CERT_FILE): the origin gets the header,
// and the ledger's record of the execution holds the allowed request, each refusal counted
// by host, port and reason, and bytes both ways; no file of the data dir holds the secret.
func TestRunNetworkRulesInLedger(t *testing.T) {
	requireNamespaces(t)
	const secret = "sk-ledger-3b9e1d7c44"
	var mu sync.Mutex
	seen := map[string]string{} // path → Authorization
	origin := egresstest.NewOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Get("Authorization")
		mu.Unlock()
		fmt.Fprintf(w, "tls hello %s", r.URL.Path)
	}))
	port := origin.Port
	roots := origin.RootsFile(t)
	data := t.TempDir()
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
profiles:
  default:
    backend: namespaces
    isolation: isolated
    network:
      allow: ["127.0.0.1:%d"]
      credentials: [{host: 127.0.0.1, header: Authorization, value: {env: LEDGER_TEST_SECRET}}]
tenants: {local: {agents: {default: {code_execution: {isolation: isolated, network: rules}}}}}
`, data, port))
	prog := fmt.Sprintf(`
import urllib.request, urllib.error
def get(u):
    try:
        return urllib.request.urlopen(u, timeout=120).read().decode()
    except urllib.error.HTTPError as e:
        return "%%d" %% e.code
    except OSError as e:
        return "refused: %%s" %% e
[get("https://127.0.0.1:%[1]d/data"), get("https://other.example.test:%[1]d/"), get("https://other.example.test:%[1]d/again"),
 get("http://127.0.0.2:%[1]d/")]
`, port)
	cmd := exec.Command(testkit.Binary(t), "run", "--log-level", "info", "--config", cfg, "-")
	cmd.Stdin = strings.NewReader(prog)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir(), "SSL_CERT_FILE="+roots, "LEDGER_TEST_SECRET=Bearer "+secret)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v\nstdout %s\nstderr %s", err, stdout.String(), stderr.String())
	}
	var res struct {
		Value []string `json:"value"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if len(res.Value) != 4 || res.Value[0] != "tls hello /data" {
		t.Fatalf("value %q\nstderr %s", res.Value, stderr.String())
	}
	mu.Lock()
	got := seen["/data"]
	mu.Unlock()
	if got != "Bearer "+secret {
		t.Errorf("the origin saw Authorization %q, want the credential", got)
	}
	m := regexp.MustCompile(`execution=(x_[0-9a-f]+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no execution id in the log:\n%s", stderr.String())
	}
	l, err := sqlite.Open(t.Context(), data, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := l.Execution(t.Context(), m[1])
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rec.Network == nil {
		t.Fatalf("the ledger's record of %s has no network block: %+v", m[1], rec)
	}
	var n struct { // egress.Stats.Record's JSON
		Allowed, Refused int64
		Refusals         []egress.RefusalCount
		BytesIn          int64 `json:"bytes_in"`
		BytesOut         int64 `json:"bytes_out"`
	}
	if err := json.Unmarshal(rec.Network, &n); err != nil {
		t.Fatalf("the ledger's network block %s: %v", rec.Network, err)
	}
	want := []egress.RefusalCount{
		{Refusal: egress.Refusal{Host: "other.example.test", Port: port, Reason: egress.ReasonNotAllowed}, Times: 2},
		{Refusal: egress.Refusal{Host: "127.0.0.2", Port: port, Reason: egress.ReasonIPLiteral}, Times: 1},
	}
	if n.Allowed != 1 || n.Refused != 3 || !slices.Equal(n.Refusals, want) || n.BytesIn == 0 || n.BytesOut == 0 {
		t.Errorf("the ledger holds network %+v; want 1 allowed, refusals %+v, bytes both ways", n, want)
	}
	// Nothing the server keeps holds the secret: the ledger's files, its outputs, its logs.
	filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the credential", p)
		}
		return nil
	})
	if strings.Contains(stdout.String()+stderr.String(), secret) {
		t.Error("the result or the log holds the credential")
	}
}

// Issue 28: a contained upstream is given the host paths it declares and no others: it reads
// a read-only one but cannot write there, writes a read-write one (the host sees the file),
// and a file beside them is not in its root.
func TestUpstreamContainedPaths(t *testing.T) {
	requireNamespaces(t)
	base := t.TempDir()
	ro, rw := filepath.Join(base, "ro"), filepath.Join(base, "rw")
	for _, d := range []string{ro, rw} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o777) // the server's identity is another uid when the test runs as root
	}
	if err := os.WriteFile(filepath.Join(ro, "in.txt"), []byte("declared input"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "beside.txt"), []byte("not declared"), 0o644); err != nil {
		t.Fatal(err)
	}
	quoted := boxScript("paths", "/nonexistent", "9")
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
profiles:
  default: {}
  boxed: {backend: namespaces, isolation: isolated}
upstreams:
  box:
    command: ["/usr/bin/python3", "-c", %s]
    env: {PROBE_RO: %q, PROBE_RW: %q}
    sandbox: boxed
    paths: {read_only: [%q], read_write: [%q]}
tenants: {local: {upstreams: [box], agents: {default: {code_execution: {}}}}}
`, quoted, ro, rw, ro, rw))
	v := probeBox(t, cfg)
	if v["ro_read"] != "declared input" || !strings.HasPrefix(fmt.Sprint(v["ro_write"]), "refused") ||
		v["rw_write"] != "written" || v["beside"] != false {
		t.Errorf("the server saw %v: want the read-only path read and not written, the read-write one written, nothing beside", v)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "out.txt")); err != nil || string(b) != "from the box" {
		t.Errorf("the host reads %q, %v from the read-write path", b, err)
	}
	if _, err := os.Stat(filepath.Join(ro, "new.txt")); err == nil {
		t.Error("the server wrote into its read-only path")
	}
}

// Issue 28: `sandbox:` naming a profile of backend local at isolation process (what the
// embedded and example configs do) contains the server where this host can, and where it
// cannot (namespaces and bwrap disabled, standing in for such a host) runs it unconfined, doctor and
// the log saying why; a profile naming its backend never falls back.
func TestUpstreamContainedWhereItCan(t *testing.T) {
	requireNamespaces(t)
	quoted := boxScript("local", "/nonexistent", "9")
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: "-"
profiles:
  default: {backend: local, allow_same_uid: true}
  strict: {backend: namespaces, isolation: isolated}
upstreams:
  box: {command: ["/usr/bin/python3", "-c", %s], sandbox: default}
  pinned: {command: ["/bin/true"], sandbox: strict}
  loose: {command: ["/bin/true"]}
tenants: {local: {upstreams: [box], agents: {default: {code_execution: {}}}}}
`, quoted))
	cli := func(disable string, stdin string, args ...string) (string, string) {
		cmd := exec.Command(testkit.Binary(t), args...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir(), "MCP_SANDBOX_DISABLE="+disable)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		_ = cmd.Run() // doctor exits 1 when a profile is not ready: strict, with namespaces disabled
		return o.String(), e.String()
	}
	type state struct {
		Name      string `json:"name"`
		Contained bool   `json:"contained"`
		State     string `json:"state"`
	}
	doctor := func(disable string) map[string]state {
		out, errOut := cli(disable, "", "doctor", "--json", "--config", cfg)
		var d struct {
			Upstreams []state `json:"upstreams"`
		}
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("doctor: %v\n%s\n%s", err, out, errOut)
		}
		m := map[string]state{}
		for _, s := range d.Upstreams {
			m[s.Name] = s
		}
		return m
	}
	probe := func(disable string) map[string]any {
		out, errOut := cli(disable, "await box__probe()", "run", "--config", cfg, "-")
		var res struct {
			Value map[string]any `json:"value"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Value == nil {
			t.Fatalf("run: %v\n%s\n%s", err, out, errOut)
		}
		return res.Value
	}

	d := doctor("")
	if !d["box"].Contained || !strings.Contains(d["box"].State, "namespaces") || !d["pinned"].Contained ||
		d["loose"].Contained || !strings.Contains(d["loose"].State, "this host can contain it") {
		t.Errorf("doctor with namespaces: %+v", d)
	}
	if v := probe(""); v["ppid"] != float64(1) {
		t.Errorf("the server saw %v: want it in its own pid namespace", v)
	}

	d = doctor("namespaces,bwrap")
	if d["box"].Contained || !strings.HasPrefix(d["box"].State, "UNCONFINED") || !strings.Contains(d["box"].State, "namespace creation is disabled") ||
		!d["pinned"].Contained {
		t.Errorf("doctor without namespaces: %+v", d)
	}
	if v := probe("namespaces,bwrap"); v["ppid"] == float64(1) || v["procs"].(float64) <= 2 {
		t.Errorf("the server saw %v: want it run as a process of the host's", v)
	}
}

// headProgram sends, through the execution's proxy, one plain request whose head is about
// head bytes (a header streamed in chunks, so the program never holds it) and reads its
// status line, then an allowed HTTPS GET, then the paths that would leave /v1/ over HTTPS
// and over http: the value is {"head", "ok", "paths"}.
const headProgram = `
import os, socket, threading, urllib.request, urllib.error
def get(u):
    try:
        return "200 " + urllib.request.urlopen(u, timeout=120).read().decode()
    except urllib.error.HTTPError as e:
        return "%%d %%s" %% (e.code, e.read().decode()[:300])
    except OSError as e:
        return "error: %%s" %% e
def head(target, n):
    host, port = os.environ["HTTP_PROXY"].rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=120)
    status = []
    def read():
        data = b""
        while b"\r\n" not in data:
            try:
                b = s.recv(4096)
            except OSError:
                break
            if not b:
                break
            data += b
        status.append(data.split(b"\r\n", 1)[0].decode())
    r = threading.Thread(target=read)
    r.start()
    try:
        s.sendall(("GET %%s HTTP/1.1\r\nHost: x\r\nX-Pad: " %% target).encode())
        chunk, sent = b"a" * 65536, 0
        while sent < n:
            part = chunk[:min(65536, n - sent)]
            s.sendall(part)
            sent += len(part)
        s.sendall(b"\r\n\r\n")
    except OSError:
        pass
    r.join()
    s.close()
    return status[0] if status else ""
ATTACKS = ("/v1/../admin", "/v1/%%2e%%2e/admin", "/v1/%%2f..%%2fadmin", "/v1/..%%5cadmin")
return {"head": head("http://%[1]s/v1/x", %[3]d), "ok": get("https://%[2]s/v1/ok"),
        "paths": [get("https://%[2]s" + p) for p in ATTACKS] + [get("http://%[1]s" + p) for p in ATTACKS]}
`

// Issue 38, S1 and S4 through the built binary: under `run` with rules allowing GET under
// /v1/ of an HTTPS origin (with a credential) and of a plain one, the paths that leave /v1/
// are refused over both and neither origin sees them; a 62 MiB header line is answered 431,
// and the run's peak resident memory stays within 16 MiB of the same run sending a 1 KiB one.
func TestRunNetworkRulesPathsAndHeads(t *testing.T) {
	requireNamespaces(t)
	var mu sync.Mutex
	var seen []string
	record := func(scheme string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, scheme+" "+r.RequestURI+" auth="+r.Header.Get("Authorization"))
			mu.Unlock()
			fmt.Fprintf(w, "served %s", r.URL.Path)
		})
	}
	secure := egresstest.NewOrigin(t, record("https"))
	plain := httptest.NewServer(record("http"))
	defer plain.Close()
	plainHost := strings.TrimPrefix(plain.URL, "http://")
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
profiles:
  default:
    backend: namespaces
    isolation: isolated
    network:
      allow: ["https://%[1]s/v1/ GET", "http://%[2]s/v1/ GET"]
      credentials: [{host: 127.0.0.1, header: Authorization, value: {env: HEADS_TEST_SECRET}}]
tenants: {local: {agents: {default: {code_execution: {isolation: isolated, network: rules}}}}}
`, secure.Addr(), plainHost))
	roots := secure.RootsFile(t)
	type value struct {
		Head  string   `json:"head"`
		OK    string   `json:"ok"`
		Paths []string `json:"paths"`
	}
	// run runs the program with a head of n bytes and returns its value and the run's peak
	// resident memory (its own, or a descendant's it waited for, whichever was larger).
	run := func(n int) (value, int64) {
		cmd := exec.Command(testkit.Binary(t), "run", "--config", cfg, "-")
		cmd.Stdin = strings.NewReader(fmt.Sprintf(headProgram, plainHost, secure.Addr(), n))
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir(), "SSL_CERT_FILE="+roots, "HEADS_TEST_SECRET=Bearer heads-s3cret")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("run: %v\nstdout %s\nstderr %s", err, stdout.String(), stderr.String())
		}
		var res struct {
			Value value `json:"value"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			t.Fatalf("%v: %s", err, stdout.String())
		}
		return res.Value, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
	}
	small, smallRSS := run(1 << 10)
	big, bigRSS := run(62 << 20)
	t.Logf("peak resident memory of run: %d KiB with a 1 KiB header, %d KiB with a 62 MiB one", smallRSS, bigRSS)
	if !strings.HasPrefix(small.Head, "HTTP/1.1 200") || !strings.HasPrefix(big.Head, "HTTP/1.1 431") {
		t.Errorf("a 1 KiB head: %q; a 62 MiB head: %q; want 200 and 431", small.Head, big.Head)
	}
	if bigRSS > smallRSS+16<<10 { // Maxrss is in KiB
		t.Errorf("run peaked at %d KiB with a 62 MiB header, more than 16 MiB over the %d KiB of a plain run", bigRSS, smallRSS)
	}
	for _, v := range []value{small, big} {
		if v.OK != "200 served /v1/ok" {
			t.Errorf("the allowed GET: %q", v.OK)
		}
		for i, p := range v.Paths {
			if !strings.HasPrefix(p, "403 ") || !strings.Contains(p, egress.ReasonBadRequest) {
				t.Errorf("path %d: %q, want a 403 naming %s", i, p, egress.ReasonBadRequest)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"http /v1/x auth=", "https /v1/ok auth=Bearer heads-s3cret", "https /v1/ok auth=Bearer heads-s3cret"}
	slices.Sort(seen)
	if !slices.Equal(seen, want) {
		t.Errorf("the origins saw %q, want %q", seen, want)
	}
}
