package k8stest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestMain removes, once the tests end, the binary the kit built for TestContainerArgsParse.
func TestMain(m *testing.M) { os.Exit(testkit.Run(m)) }

// manifestsDir holds the manifests, relative to this package.
const manifestsDir = "../kubernetes"

// set is every object of the manifests, by kind, then "namespace/name".
type set struct {
	namespaces  map[string]*corev1.Namespace
	secrets     map[string]*corev1.Secret
	configMaps  map[string]*corev1.ConfigMap
	services    map[string]*corev1.Service
	deployments map[string]*appsv1.Deployment
	policies    map[string]*networkingv1.NetworkPolicy
}

// decodeStrict decodes one YAML document into the k8s.io/api type its apiVersion and kind
// name; an unknown field, a duplicate key or an unknown kind is an error.
func (s *set) decodeStrict(doc []byte) error {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var obj interface {
		GetName() string
		GetNamespace() string
	}
	var add func()
	switch tm.APIVersion + "/" + tm.Kind {
	case "v1/Namespace":
		o := &corev1.Namespace{}
		obj, add = o, func() { s.namespaces[o.Name] = o }
	case "v1/Secret":
		o := &corev1.Secret{}
		obj, add = o, func() { s.secrets[key(o.Namespace, o.Name)] = o }
	case "v1/ConfigMap":
		o := &corev1.ConfigMap{}
		obj, add = o, func() { s.configMaps[key(o.Namespace, o.Name)] = o }
	case "v1/Service":
		o := &corev1.Service{}
		obj, add = o, func() { s.services[key(o.Namespace, o.Name)] = o }
	case "apps/v1/Deployment":
		o := &appsv1.Deployment{}
		obj, add = o, func() { s.deployments[key(o.Namespace, o.Name)] = o }
	case "networking.k8s.io/v1/NetworkPolicy":
		o := &networkingv1.NetworkPolicy{}
		obj, add = o, func() { s.policies[key(o.Namespace, o.Name)] = o }
	default:
		return fmt.Errorf("apiVersion %q kind %q is not one this test knows", tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return err
	}
	if obj.GetName() == "" {
		return fmt.Errorf("%s without a name", tm.Kind)
	}
	if tm.Kind != "Namespace" && obj.GetNamespace() == "" {
		return fmt.Errorf("%s %s has no namespace", tm.Kind, obj.GetName())
	}
	add()
	return nil
}

func key(ns, name string) string { return ns + "/" + name }

// documents splits a multi-document YAML file at its "---" lines, dropping empty documents.
func documents(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if len(bytes.TrimSpace(stripComments(cur.Bytes()))) > 0 {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if string(bytes.TrimRight(line, " \r\n")) == "---" {
			flush()
			continue
		}
		cur.Write(line)
	}
	flush()
	return docs
}

func stripComments(b []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

func load(t *testing.T) *set {
	t.Helper()
	s := &set{namespaces: map[string]*corev1.Namespace{}, secrets: map[string]*corev1.Secret{},
		configMaps: map[string]*corev1.ConfigMap{}, services: map[string]*corev1.Service{},
		deployments: map[string]*appsv1.Deployment{}, policies: map[string]*networkingv1.NetworkPolicy{}}
	files, err := filepath.Glob(filepath.Join(manifestsDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestsDir, err)
	}
	others, _ := filepath.Glob(filepath.Join(manifestsDir, "*"))
	for _, f := range others {
		if filepath.Ext(f) != ".yaml" {
			t.Errorf("%s: every manifest is a .yaml file (kubectl apply -f reads .yml and .json too, and this test would not)", f)
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range documents(data) {
			if err := s.decodeStrict(doc); err != nil {
				t.Errorf("%s, document %d: %v", filepath.Base(f), i+1, err)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return s
}

// TestStrictDecodingRefusesUnknownFields: the decoder this test relies on does refuse a
// misspelt field, a field at the wrong level and a duplicate key.
func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	s := &set{deployments: map[string]*appsv1.Deployment{}}
	for name, doc := range map[string]string{
		"misspelt":  "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x, namespace: y}\nspec: {replica: 3}\n",
		"misplaced": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x, namespace: y}\nspec: {template: {spec: {containers: [{name: c, readinesProbe: {}}]}}}\n",
		"duplicate": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x, namespace: y}\nspec: {replicas: 1, replicas: 2}\n",
		"unknown":   "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: x, namespace: y}\n",
	} {
		if err := s.decodeStrict([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
	if err := s.decodeStrict([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x, namespace: y}\nspec: {replicas: 3}\n")); err != nil {
		t.Errorf("a correct Deployment: %v", err)
	}
}

// TestManifestsDecodeStrictly: every manifest decodes into its type, in a namespace the
// manifests define, and the set holds what the deployment needs.
func TestManifestsDecodeStrictly(t *testing.T) {
	s := load(t)
	for _, k := range sortedKeys(s.secrets) {
		ns := s.secrets[k].Namespace
		if s.namespaces[ns] == nil {
			t.Errorf("secret %s: namespace %s is not among the manifests", k, ns)
		}
	}
	for _, group := range []map[string]string{names(s.configMaps), names(s.services), names(s.deployments), names(s.policies)} {
		for k, ns := range group {
			if s.namespaces[ns] == nil {
				t.Errorf("%s: namespace %s is not among the manifests", k, ns)
			}
		}
	}
	if server(t, s) == nil || worker(t, s) == nil {
		t.Fatal("the manifests lack the server or the sandbox-service Deployment")
	}
	if len(s.policies) == 0 {
		t.Error("no NetworkPolicy")
	}
}

func names[T interface{ GetNamespace() string }](m map[string]T) map[string]string {
	out := map[string]string{}
	for k, o := range m {
		out[k] = o.GetNamespace()
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// server and worker are the two Deployments, told apart by their command.
func server(t *testing.T, s *set) *appsv1.Deployment { return byCommand(t, s, "serve") }
func worker(t *testing.T, s *set) *appsv1.Deployment { return byCommand(t, s, "sandbox-service") }

func byCommand(t *testing.T, s *set, cmd string) *appsv1.Deployment {
	t.Helper()
	var found *appsv1.Deployment
	for _, k := range sortedKeys(s.deployments) {
		d := s.deployments[k]
		if c := d.Spec.Template.Spec.Containers; len(c) > 0 && len(c[0].Args) > 0 && c[0].Args[0] == cmd {
			if found != nil {
				t.Errorf("two Deployments run %q: %s and %s", cmd, found.Name, d.Name)
			}
			found = d
		}
	}
	return found
}

// flag returns the value of --name in args ("" when absent).
func flag(args []string, name string) string {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// TestDeploymentsWiring: selectors match their pod labels; probes name a container port and
// the right paths; the listen port is a container port; every Secret, key, ConfigMap and
// volume a pod names exists; --config is a file of a mounted ConfigMap.
func TestDeploymentsWiring(t *testing.T) {
	s := load(t)
	for _, k := range sortedKeys(s.deployments) {
		d := s.deployments[k]
		ns, pod := d.Namespace, d.Spec.Template
		if d.Spec.Selector == nil || len(d.Spec.Selector.MatchLabels) == 0 || len(d.Spec.Selector.MatchExpressions) > 0 {
			t.Errorf("%s: the selector must be matchLabels only", k)
			continue
		}
		if !subset(d.Spec.Selector.MatchLabels, pod.Labels) {
			t.Errorf("%s: selector %v does not match the pod labels %v", k, d.Spec.Selector.MatchLabels, pod.Labels)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("%s: replicas %v; one replica is no scale-out", k, d.Spec.Replicas)
		}
		volumes := map[string]corev1.Volume{}
		for _, v := range pod.Spec.Volumes {
			volumes[v.Name] = v
			switch {
			case v.ConfigMap != nil && s.configMaps[key(ns, v.ConfigMap.Name)] == nil:
				t.Errorf("%s: volume %s names ConfigMap %s, which is not in namespace %s", k, v.Name, v.ConfigMap.Name, ns)
			case v.Secret != nil && s.secrets[key(ns, v.Secret.SecretName)] == nil:
				t.Errorf("%s: volume %s names Secret %s, which is not in namespace %s", k, v.Name, v.Secret.SecretName, ns)
			}
		}
		for _, c := range pod.Spec.Containers {
			where := k + " container " + c.Name
			if c.Image == "" {
				t.Errorf("%s: no image", where)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s: resources must request CPU and memory and limit memory: %+v", where, c.Resources)
			}
			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			probe := func(what string, p *corev1.Probe, path string) {
				switch {
				case p == nil || p.HTTPGet == nil:
					t.Errorf("%s: no HTTP %s probe", where, what)
				case p.HTTPGet.Path != path:
					t.Errorf("%s: %s probe on %s, want %s", where, what, p.HTTPGet.Path, path)
				case !portOf(p.HTTPGet.Port, ports):
					t.Errorf("%s: %s probe port %s is none of the container's ports %v", where, what, p.HTTPGet.Port.String(), ports)
				}
			}
			probe("readiness", c.ReadinessProbe, "/readyz")
			probe("liveness", c.LivenessProbe, "/healthz")
			if _, port, err := net.SplitHostPort(flag(c.Args, "listen")); err != nil {
				t.Errorf("%s: --listen %q: %v", where, flag(c.Args, "listen"), err)
			} else if n, _ := strconv.Atoi(port); !slices.Contains(mapsValues(ports), int32(n)) {
				t.Errorf("%s: listens on port %s, which is none of its container ports %v", where, port, ports)
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil && !secretHas(s.secrets[key(ns, r.Name)], r.Key) {
					t.Errorf("%s: env %s wants key %s of Secret %s, which namespace %s does not have", where, e.Name, r.Key, r.Name, ns)
				}
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					if cm := s.configMaps[key(ns, r.Name)]; cm == nil || cm.Data[r.Key] == "" {
						t.Errorf("%s: env %s wants key %s of ConfigMap %s, which namespace %s does not have", where, e.Name, r.Key, r.Name, ns)
					}
				}
			}
			for _, m := range c.VolumeMounts {
				if _, ok := volumes[m.Name]; !ok {
					t.Errorf("%s: mounts volume %s, which the pod does not have", where, m.Name)
				}
			}
			if _, ok := configFile(s, d, c); !ok {
				t.Errorf("%s: --config %q is no key of a ConfigMap mounted in the container", where, flag(c.Args, "config"))
			}
			if c.SecurityContext == nil {
				t.Errorf("%s: no securityContext", where)
				continue
			}
			// The API server refuses these pairs (ValidateSecurityContext); a decoder does not
			// know. It compares the capability's spelling "CAP_SYS_ADMIN" only.
			sc := c.SecurityContext
			if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
				if sc.Privileged != nil && *sc.Privileged {
					t.Errorf("%s: allowPrivilegeEscalation false with privileged true is refused by the API server", where)
				}
				if sc.Capabilities != nil && slices.Contains(sc.Capabilities.Add, "CAP_SYS_ADMIN") {
					t.Errorf("%s: allowPrivilegeEscalation false with capabilities.add CAP_SYS_ADMIN is refused by the API server", where)
				}
			}
		}
	}
}

func mapsValues(m map[string]int32) []int32 {
	var out []int32
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func portOf(p intstr.IntOrString, ports map[string]int32) bool {
	if p.Type == intstr.String {
		_, ok := ports[p.StrVal]
		return ok
	}
	return slices.Contains(mapsValues(ports), p.IntVal)
}

func secretHas(s *corev1.Secret, k string) bool {
	if s == nil {
		return false
	}
	_, inData := s.Data[k]
	_, inString := s.StringData[k]
	return inData || inString
}

func secretValue(s *corev1.Secret, k string) string {
	if v, ok := s.StringData[k]; ok {
		return v
	}
	return string(s.Data[k])
}

// configFile is the text of the file --config names: a key of a ConfigMap mounted at its
// directory.
func configFile(s *set, d *appsv1.Deployment, c corev1.Container) (string, bool) {
	path := flag(c.Args, "config")
	if path == "" {
		return "", false
	}
	for _, m := range c.VolumeMounts {
		if filepath.Dir(path) != filepath.Clean(m.MountPath) {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				if cm := s.configMaps[key(d.Namespace, v.ConfigMap.Name)]; cm != nil {
					text, ok := cm.Data[filepath.Base(path)]
					return text, ok
				}
			}
		}
	}
	return "", false
}

// TestServicesSelectTheirPods: each Service selects exactly one Deployment's pods in its
// namespace, and each of its ports targets a port of that Deployment's container.
func TestServicesSelectTheirPods(t *testing.T) {
	s := load(t)
	for _, k := range sortedKeys(s.services) {
		svc := s.services[k]
		d := selected(s, svc.Namespace, svc.Spec.Selector)
		if len(d) != 1 {
			t.Errorf("service %s selects %d Deployments, want 1", k, len(d))
			continue
		}
		ports := map[string]int32{}
		for _, p := range d[0].Spec.Template.Spec.Containers[0].Ports {
			ports[p.Name] = p.ContainerPort
		}
		for _, p := range svc.Spec.Ports {
			if !portOf(p.TargetPort, ports) {
				t.Errorf("service %s port %s targets %s, none of %s's ports %v", k, p.Name, p.TargetPort.String(), d[0].Name, ports)
			}
		}
	}
}

func selected(s *set, ns string, sel map[string]string) []*appsv1.Deployment {
	var out []*appsv1.Deployment
	if len(sel) == 0 {
		return nil
	}
	for _, k := range sortedKeys(s.deployments) {
		if d := s.deployments[k]; d.Namespace == ns && subset(sel, d.Spec.Template.Labels) {
			out = append(out, d)
		}
	}
	return out
}

// serviceAt is the Service a cluster DNS name (name.namespace.svc[.cluster.local]) names.
func serviceAt(s *set, host string) *corev1.Service {
	parts := strings.Split(strings.TrimSuffix(host, ".cluster.local"), ".")
	if len(parts) != 3 || parts[2] != "svc" {
		return nil
	}
	return s.services[key(parts[1], parts[0])]
}

// TestServerConfig: the server's config, with the tenants of its Secret, is valid; every
// credential it references is an env var of the container from a Secret; tenants_dir is where
// that Secret is mounted; its remote profile reaches the workers' Service on one of its ports,
// with a token whose hash the workers accept.
func TestServerConfig(t *testing.T) {
	s := load(t)
	d := server(t, s)
	c := d.Spec.Template.Spec.Containers[0]
	text, ok := configFile(s, d, c)
	if !ok {
		t.Fatal("the server's --config is not in a ConfigMap")
	}
	parsed, err := configs.Parse([]byte(text), "server config.yaml")
	if err != nil {
		t.Fatalf("server config: %v", err)
	}
	// The tenants: the Secret mounted at tenants_dir, laid out as the pod sees it.
	var tenants *corev1.Secret
	for _, m := range c.VolumeMounts {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil && filepath.Clean(m.MountPath) == filepath.Clean(parsed.TenantsDir) {
				tenants = s.secrets[key(d.Namespace, v.Secret.SecretName)]
			}
		}
	}
	if tenants == nil {
		t.Fatalf("tenants_dir %q is not where a Secret is mounted", parsed.TenantsDir)
	}
	dir := t.TempDir()
	tdir := filepath.Join(dir, "tenants")
	os.Mkdir(tdir, 0o755)
	for _, k := range sortedKeys(tenants.StringData) {
		os.WriteFile(filepath.Join(tdir, k), []byte(secretValue(tenants, k)), 0o644)
	}
	for k := range tenants.Data {
		os.WriteFile(filepath.Join(tdir, k), tenants.Data[k], 0o644)
	}
	local := strings.ReplaceAll(text, parsed.TenantsDir, tdir)
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(local), 0o644)
	cfg, err := configs.Load(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatalf("server config with its tenants: %v", err)
	}
	if len(cfg.Tenants) == 0 {
		t.Error("no tenant: serve refuses to start")
	}
	for name, tn := range cfg.Tenants {
		if len(tn.Tokens) == 0 {
			t.Errorf("tenant %s has no token: serve refuses to listen beyond loopback", name)
		}
	}

	env := map[string]*corev1.EnvVarSource{}
	for _, e := range c.Env {
		env[e.Name] = e.ValueFrom
	}
	fromSecret := func(what string, ref *configs.Credential) string {
		if ref == nil || ref.Env == "" {
			t.Errorf("%s: not an env reference", what)
			return ""
		}
		src := env[ref.Env]
		if src == nil || src.SecretKeyRef == nil {
			t.Errorf("%s: env %s is not set from a Secret in the container", what, ref.Env)
			return ""
		}
		return secretValue(s.secrets[key(d.Namespace, src.SecretKeyRef.Name)], src.SecretKeyRef.Key)
	}
	if cfg.Ledger == nil || cfg.Ledger.Postgres == nil || cfg.Blobs == nil || cfg.Blobs.Postgres == nil {
		t.Fatal("replicas need the ledger and the blob store on PostgreSQL")
	}
	if dsn := fromSecret("ledger dsn", &cfg.Ledger.Postgres.DSN); !strings.HasPrefix(dsn, "postgres://") {
		t.Errorf("the DSN Secret does not hold a postgres:// URL")
	}
	fromSecret("blobs dsn", &cfg.Blobs.Postgres.DSN)

	w := worker(t, s)
	wc := w.Spec.Template.Spec.Containers[0]
	wtext, _ := configFile(s, w, wc)
	wcfg, err := configs.Parse([]byte(wtext), "sandbox-service config.yaml")
	if err != nil {
		t.Fatalf("sandbox-service config: %v", err)
	}
	for name, p := range cfg.Profiles {
		if p.Backend != "remote" {
			t.Errorf("profile %s: backend %s; the servers run no program themselves (they have no privilege)", name, p.Backend)
			continue
		}
		u, err := url.Parse(p.Remote.URL)
		if err != nil {
			t.Fatalf("profile %s: %v", name, err)
		}
		svc := serviceAt(s, u.Hostname())
		if svc == nil {
			t.Errorf("profile %s: %s names no Service of the manifests", name, u.Host)
			continue
		}
		port, _ := strconv.Atoi(u.Port())
		if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return int(sp.Port) == port }) {
			t.Errorf("profile %s: port %d is not a port of Service %s", name, port, svc.Name)
		}
		if ds := selected(s, svc.Namespace, svc.Spec.Selector); len(ds) != 1 || ds[0] != w {
			t.Errorf("profile %s: Service %s does not select the sandbox-service Deployment", name, svc.Name)
		}
		if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
			t.Errorf("Service %s: an execution's results must reach the worker holding its stream; sessionAffinity %q", svc.Name, svc.Spec.SessionAffinity)
		}
		tok := fromSecret("profile "+name+" remote bearer", p.Remote.Bearer)
		if !slices.Contains(wcfg.SandboxService.Tokens, configs.HashToken(tok)) {
			t.Errorf("profile %s: the workers do not accept its token (sha256 %s not in sandbox_service.tokens)", name, sha(tok))
		}
	}
}

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:8]) + "…" }

// TestWorkerConfig: the sandbox service's config is valid and runs a local backend; its
// run_as pool lies within the pod's mapped ids and has a uid per concurrent execution; its
// memory limit holds that many executions at their cap; its grace period outlasts its drain.
func TestWorkerConfig(t *testing.T) {
	s := load(t)
	w := worker(t, s)
	pod := w.Spec.Template.Spec
	c := pod.Containers[0]
	text, _ := configFile(s, w, c)
	cfg, err := configs.Parse([]byte(text), "sandbox-service config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SandboxService == nil || len(cfg.SandboxService.Tokens) == 0 {
		t.Fatal("no sandbox_service tokens: the service refuses to listen beyond loopback")
	}
	name := cmp(cfg.SandboxService.Profile, "default")
	p, ok := cfg.Profiles[name]
	if !ok || p.Backend == "remote" {
		t.Fatalf("sandbox_service.profile %q: missing or remote", name)
	}
	maxExec, err := strconv.Atoi(flag(c.Args, "max-executions"))
	if err != nil {
		t.Fatalf("--max-executions: %v", err)
	}
	lo, hi, err := uidRange(p.RunAs)
	if err != nil {
		t.Fatal(err)
	}
	if hi-lo+1 < maxExec {
		t.Errorf("run_as %s holds %d uids for %d executions at once", p.RunAs, hi-lo+1, maxExec)
	}
	if pod.HostUsers != nil && !*pod.HostUsers && hi > 65535 {
		t.Errorf("run_as %s: a pod with hostUsers false maps ids 0-65535 only", p.RunAs)
	}
	need := resource.NewQuantity(int64(*p.HardLimits.MemoryBytes)*int64(maxExec), resource.BinarySI)
	if c.Resources.Limits.Memory().Cmp(*need) < 0 {
		t.Errorf("memory limit %s < %d executions × %d bytes", c.Resources.Limits.Memory(), maxExec, int64(*p.HardLimits.MemoryBytes))
	}
	drain, err := time.ParseDuration(flag(c.Args, "drain-timeout"))
	if err != nil {
		t.Fatalf("--drain-timeout: %v", err)
	}
	if pod.TerminationGracePeriodSeconds == nil || time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second <= drain {
		t.Errorf("terminationGracePeriodSeconds %v does not outlast --drain-timeout %v", pod.TerminationGracePeriodSeconds, drain)
	}
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func uidRange(runAs string) (int, int, error) {
	a, b, ok := strings.Cut(strings.SplitN(runAs, ":", 2)[0], "-")
	lo, err := strconv.Atoi(a)
	if err != nil {
		return 0, 0, fmt.Errorf("run_as %q: %v", runAs, err)
	}
	if !ok {
		return lo, lo, nil
	}
	hi, err := strconv.Atoi(b)
	return lo, hi, err
}

// TestWorkersNetworkPolicy: the workers' pods may open no connection, and only the servers'
// pods reach them, on the port they serve.
func TestWorkersNetworkPolicy(t *testing.T) {
	s := load(t)
	w, srv := worker(t, s), server(t, s)
	var found bool
	for _, k := range sortedKeys(s.policies) {
		np := s.policies[k]
		if np.Namespace != w.Namespace || !subset(np.Spec.PodSelector.MatchLabels, w.Spec.Template.Labels) || len(np.Spec.PodSelector.MatchLabels) == 0 {
			continue
		}
		found = true
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || len(np.Spec.Egress) != 0 {
			t.Errorf("%s: egress is not denied: types %v, rules %v", k, np.Spec.PolicyTypes, np.Spec.Egress)
		}
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || len(np.Spec.Ingress) == 0 {
			t.Errorf("%s: ingress is not restricted", k)
			continue
		}
		ports := map[string]int32{}
		for _, p := range w.Spec.Template.Spec.Containers[0].Ports {
			ports[p.Name] = p.ContainerPort
		}
		for _, rule := range np.Spec.Ingress {
			for _, from := range rule.From {
				if from.NamespaceSelector == nil || from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != srv.Namespace ||
					from.PodSelector == nil || len(from.PodSelector.MatchLabels) == 0 || !subset(from.PodSelector.MatchLabels, srv.Spec.Template.Labels) {
					t.Errorf("%s: ingress from %+v is not the servers' pods alone", k, from)
				}
			}
			if len(rule.From) == 0 {
				t.Errorf("%s: an ingress rule from anywhere", k)
			}
			for _, p := range rule.Ports {
				if p.Port == nil || !portOf(*p.Port, ports) {
					t.Errorf("%s: ingress port %v is not the workers' port", k, p.Port)
				}
			}
		}
	}
	if !found {
		t.Error("no NetworkPolicy selects the sandbox-service pods")
	}
}

// TestServerIsRestricted: the server pods meet the restricted Pod Security profile their
// namespace enforces: non-root, no privilege escalation, every capability dropped, the
// runtime's seccomp profile, and a read-only root filesystem.
func TestServerIsRestricted(t *testing.T) {
	s := load(t)
	d := server(t, s)
	if lvl := s.namespaces[d.Namespace].Labels["pod-security.kubernetes.io/enforce"]; lvl != "restricted" {
		t.Errorf("namespace %s enforces %q, want restricted", d.Namespace, lvl)
	}
	pod := d.Spec.Template.Spec
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot, a non-zero runAsUser, seccomp RuntimeDefault", psc)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 ||
			(sc.Privileged != nil && *sc.Privileged) {
			t.Errorf("container %s securityContext %+v is not restricted", c.Name, sc)
		}
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the server needs no Kubernetes API token; automountServiceAccountToken should be false")
	}
}

// TestContainerArgsParse: every container's command line is one the built mcp-sandbox
// accepts (a misspelt flag would only show as a pod that never starts): the arguments with
// --help appended parse and exit 0.
func TestContainerArgsParse(t *testing.T) {
	s := load(t)
	bin := testkit.Binary(t)
	for _, k := range sortedKeys(s.deployments) {
		for _, c := range s.deployments[k].Spec.Template.Spec.Containers {
			if len(c.Command) > 0 {
				t.Errorf("%s container %s: a command replaces the image's entrypoint; give args only", k, c.Name)
			}
			out, err := exec.Command(bin, append(slices.Clone(c.Args), "--help")...).CombinedOutput()
			if err != nil {
				t.Errorf("%s container %s: mcp-sandbox %s: %v\n%s", k, c.Name, strings.Join(c.Args, " "), err, out)
			}
		}
	}
}

// TestImagesAreTheOnesBuilt: each Deployment runs the image `make images` builds for it
// (mcp-sandbox image build --image server or worker, whose --help names them), imported into
// a node, not pulled: imagePullPolicy IfNotPresent, which a :latest tag would not default to.
func TestImagesAreTheOnesBuilt(t *testing.T) {
	s := load(t)
	out, err := exec.Command(testkit.Binary(t), "image", "build", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("mcp-sandbox image build --help: %v\n%s", err, out)
	}
	for kind, d := range map[string]*appsv1.Deployment{"server": server(t, s), "worker": worker(t, s)} {
		c := d.Spec.Template.Spec.Containers[0]
		name, tag, _ := strings.Cut(c.Image, ":")
		if want := "localhost/mcp-sandbox-" + kind; name != want || tag != "latest" {
			t.Errorf("the %s runs %s, want %s:latest, which make images builds", kind, c.Image, want)
		}
		if !strings.Contains(string(out), "("+name+")") {
			t.Errorf("mcp-sandbox image build --help does not name %s for the %s:\n%s", name, kind, out)
		}
		if c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("the %s's imagePullPolicy is %q, want IfNotPresent: the image is imported into the node, not pulled", kind, c.ImagePullPolicy)
		}
	}
}
