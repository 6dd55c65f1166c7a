package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/hostimage"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/internal/userns"
)

// TestClusterImages (issue 37, Must show 3): `image build --image server` and `--image worker`
// (what `make images` runs) build the two images deploy/kubernetes names from this host's
// files, and a server container and a worker container run in the manifests' shape with
// podman: the worker as root of a user namespace of its own (hostUsers: false: its uid 0 is
// an unprivileged id of the host) with SYS_ADMIN, NET_ADMIN, SETUID, SETGID, SYS_PTRACE and
// DAC_READ_SEARCH and no other capability, the server as uid 65532 with none, both on a read-only root with a tmpfs /tmp,
// nothing pulled. A program sent to the server runs on the worker's namespaces backend.
// Both containers share the host's loopback (as a pod's containers share one) so that the
// test reaches the server. One test: it is the expensive one.
func TestClusterImages(t *testing.T) {
	gate.Require(t, "root", os.Geteuid() == 0, "podman runs the containers as root, the worker in a user namespace of its own")
	podman, err := exec.LookPath("podman")
	gate.Require(t, "podman", err == nil, "podman is not installed")
	sub, why := userns.Host{}.Subordinate("root", 0)
	gate.Require(t, "subids", sub != nil && sub.UIDCount >= 65536, "the worker's user namespace maps root's subordinate range of 65536 ids: "+why)
	bin := testkit.Binary(t)
	stamp := fmt.Sprintf("itest-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	images := map[string]string{}
	for _, kind := range []string{"server", "worker"} {
		ref := imageNames[kind] + ":" + stamp
		out, err := exec.Command(bin, "image", "build", "--runtime", podman, "--image", kind, "--tag", ref).CombinedOutput()
		if err != nil {
			t.Fatalf("image build --image %s: %v\n%s", kind, err, out)
		}
		t.Logf("%s", strings.TrimSpace(string(out)))
		images[kind] = ref
		t.Cleanup(func() { _ = exec.Command(podman, "rmi", "-f", ref).Run() })
	}

	dir := t.TempDir()
	const token = "cluster-images-test-token"
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The worker's config is 30-workers.yaml's but for the token's hash; the server's names
	// the worker as the pod's loopback does.
	workerCfg := write("worker.yaml", fmt.Sprintf(`data_dir: "-"
profiles:
  default:
    backend: namespaces
    isolation: isolated
    run_as: "60000-60015"
    hard_limits: {cpu_seconds: 30, wall_seconds: 120, memory_bytes: 512MiB}
sandbox_service:
  tokens: [%q]
  profile: default
`, configs.HashToken(token)))
	serverCfg := write("server.yaml", fmt.Sprintf(`data_dir: "-"
profiles:
  default:
    backend: remote
    isolation: isolated
    remote: {url: "http://127.0.0.1:8443", bearer: {env: SANDBOX_TOKEN}}
tenants:
  acme:
    tokens: [%q]
    agents:
      default: {code_execution: {profile: default, isolation: isolated}}
`, configs.HashToken("acme-"+token)))
	run := func(name string, args ...string) {
		t.Helper()
		// hostimage.TryLimits: a runtime's default limits are refused where this process's are lower.
		full := append(append([]string{"run", "-d", "--rm", "--name", name, "--pull=never",
			"--read-only", "--tmpfs", "/tmp:rw,size=256m,mode=1777", "--cap-drop=ALL"}, hostimage.TryLimits()...), args...)
		if out, err := exec.Command(podman, full...).CombinedOutput(); err != nil {
			t.Fatalf("podman %s: %v\n%s", strings.Join(full, " "), err, out)
		}
		t.Cleanup(func() {
			if t.Failed() {
				logs, _ := exec.Command(podman, "logs", name).CombinedOutput()
				t.Logf("%s's log:\n%s", name, logs)
			}
			_ = exec.Command(podman, "rm", "-f", "-t", "0", name).Run()
		})
	}
	// The pod's network namespace is the worker's, with only loopback; the server joins it.
	worker, server := "mcps-worker-"+stamp, "mcps-server-"+stamp
	run(worker, "--network=none",
		"--uidmap", fmt.Sprintf("0:%d:65536", sub.UID-sub.UIDCount+1), "--gidmap", fmt.Sprintf("0:%d:65536", sub.GID-sub.GIDCount+1),
		"--user", "0:0", "--cap-add=SYS_ADMIN,NET_ADMIN,SETUID,SETGID,SYS_PTRACE,DAC_READ_SEARCH",
		"-v", workerCfg+":/etc/mcp-sandbox/config/config.yaml:ro",
		images["worker"], "sandbox-service", "--listen", "0.0.0.0:8443",
		"--config", "/etc/mcp-sandbox/config/config.yaml", "--max-executions", "8", "--drain-timeout", "60s")
	run(server, "--network=container:"+worker,
		"--user", "65532:65532", "--security-opt", "no-new-privileges", "-e", "SANDBOX_TOKEN="+token,
		"-v", serverCfg+":/etc/mcp-sandbox/config/config.yaml:ro",
		images["server"], "serve", "--transport", "http", "--listen", "0.0.0.0:8080",
		"--config", "/etc/mcp-sandbox/config/config.yaml", "--max-connections-per-address", "1024")

	// The test reaches the pod's loopback from inside its network namespace (podNet).
	pid, err := exec.Command(podman, "inspect", "-f", "{{.State.Pid}}", worker).Output()
	if err != nil {
		t.Fatalf("podman inspect %s: %v", worker, err)
	}
	rt := &http.Transport{DialContext: podNet(t, "/proc/"+strings.TrimSpace(string(pid))+"/ns/net")}
	const base = "http://127.0.0.1:8080"
	var status int
	if !waitFor(min(gate.Scaled(90*time.Second), 5*time.Minute), func() bool {
		resp, err := (&http.Client{Transport: rt, Timeout: 5 * time.Second}).Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		status = resp.StatusCode
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("the server container was not ready (its worker answering) within 90 s (last /readyz: %d)", status)
	}
	cs, err := connectHTTP(t, base+"/mcp", bearerOver{token: "acme-" + token, rt: rt}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(90*time.Second))
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{
		"code": "import os\nprint('in the worker')\nopen('made.txt', 'w').write('kept')\nos.chmod('made.txt', 0)\n" +
			"return {'v': 6*7, 'uid': os.getuid()}"}})
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Value struct {
			V   int `json:"v"`
			UID int `json:"uid"`
		} `json:"value"`
		Stdout     string            `json:"stdout"`
		Isolation  string            `json:"isolation"`
		Guarantees map[string]string `json:"guarantees"`
		Failure    any               `json:"failure"`
		Artifacts  []struct {
			Name string `json:"name"`
		} `json:"artifacts"`
		Omitted []any `json:"artifacts_omitted"`
	}
	b, _ := json.Marshal(res.Meta["mcp-sandbox/report"]) // the whole report; the model's is lean
	if err := json.Unmarshal(b, &r); err != nil || r.Failure != nil {
		t.Fatalf("run_code through the server and worker containers: %s (%v)", b, err)
	}
	if r.Value.V != 42 || r.Stdout != "in the worker\n" || r.Isolation != "isolated" {
		t.Errorf("run_code answered %s", b)
	}
	if r.Value.UID < 60000 || r.Value.UID > 60015 {
		t.Errorf("the program ran as uid %d, not one of the worker's run_as range", r.Value.UID)
	}
	// The worker reads a finished program's workspace through /proc/PID/root (SYS_PTRACE),
	// whatever modes the program left on its files (DAC_READ_SEARCH): no file is lost.
	if len(r.Artifacts) != 1 || r.Artifacts[0].Name != "made.txt" || len(r.Omitted) != 0 {
		t.Errorf("the file the program made (mode 0) did not come back as its artifact: %s", b)
	}
	for _, g := range []string{"filesystem", "network", "identity", "process_tree"} {
		if r.Guarantees[g] != "enforced" {
			t.Errorf("guarantee %s is %q in the worker container, want enforced: %s", g, r.Guarantees[g], b)
		}
	}
}

// podNet dials TCP from inside the network namespace at path (a container's), where its
// loopback is: the dialing thread enters it and leaves it again, and the socket stays in it.
func podNet(t *testing.T, path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	t.Helper()
	target, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { own.Close() })
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type dialed struct {
			c   net.Conn
			err error
		}
		ch := make(chan dialed, 1)
		go func() {
			runtime.LockOSThread() // never unlocked when the way back fails: the thread then dies with it
			if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
				runtime.UnlockOSThread()
				ch <- dialed{nil, err}
				return
			}
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
			ch <- dialed{c, err}
		}()
		d := <-ch
		return d.c, d.err
	}
}
