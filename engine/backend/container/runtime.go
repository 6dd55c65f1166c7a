package container

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// Runtime is a container runtime's CLI as found on this host.
type Runtime struct {
	Kind    string // "podman" or "docker"
	Path    string
	Version string
	// OCIRuntime is passed as --runtime; "" leaves the runtime's default.
	OCIRuntime string
	// OCINote says why the backend chose OCIRuntime, when it did.
	OCINote string
	// Rootless: the runtime runs containers without root (podman as a user).
	Rootless bool
	// CgroupParent: each container can be nested under a cgroup path the backend made
	// (cgroupfs; podman is told so, docker must be configured so).
	CgroupParent bool
	// Remote: the runtime runs containers on another kernel (a Podman machine, Docker
	// Desktop's VM, a remote daemon), which neither a socket nor a cgroup of this host
	// reaches: the channel is then the container's standard streams. Off Linux it always is.
	Remote bool
	// Arch is the architecture of the kernel that runs the containers, as the engine names
	// it (the seccomp profile is for that one).
	Arch string
	// Engine is what answers the CLI, when it says: "Podman Engine" behind a docker CLI.
	Engine string
	// CPUs is how many CPUs the engine's kernel has (0: unknown).
	CPUs int
}

// cliTimeout bounds every call of the runtime's CLI other than an execution's `run`; its
// output is bounded by cliWaitDelay after it exits.
const (
	cliTimeout   = 20 * time.Second
	cliWaitDelay = time.Second
)

// cli runs the runtime's CLI with args and returns its trimmed stdout, or an error carrying
// the first line of its stderr.
func cli(ctx context.Context, path string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = cliWaitDelay
	if err := cmd.Run(); err != nil {
		msg, _, _ := strings.Cut(strings.TrimSpace(errb.String()), "\n")
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("%s %s: %s", filepath.Base(path), args[0], msg)
	}
	return strings.TrimSpace(out.String()), nil
}

// FindRuntime finds the runtime opts names, or the first of podman and docker that answers.
// A docker CLI whose daemon does not answer is not a runtime. The error is
// backend_unavailable and says what to install; nothing is installed.
func FindRuntime(ctx context.Context, options *Options) (*Runtime, error) {
	var opts Options
	if options != nil {
		opts = *options
	}
	if slices.Contains(opts.Disable, "container") {
		return nil, failure.New(failure.BackendUnavailable, "no container runtime (disabled): %s", installGuidance)
	}
	candidates := []string{"podman", "docker"}
	if opts.Runtime != "" {
		candidates = []string{opts.Runtime}
	}
	var why []string
	for _, c := range candidates {
		rt, reason := probeRuntime(ctx, c)
		if rt != nil {
			if rt.Kind == "docker" && strings.Contains(rt.Engine, "Podman") {
				return nil, failure.New(failure.BackendUnavailable, "the docker CLI at %s reaches a Podman engine, which cannot take the sandbox's "+
					"seccomp profile from it (docker sends the profile itself, podman reads one only from a path on its own host): "+
					"use the podman CLI with the same engine (container.runtime: podman; CONTAINER_HOST or a podman system connection)", rt.Path)
			}
			if err := rt.chooseOCI(ctx, opts.OCIRuntime); err != nil {
				return nil, err
			}
			return rt, nil
		}
		why = append(why, reason)
	}
	return nil, failure.New(failure.BackendUnavailable, "no container runtime answers here (%s): %s", strings.Join(why, "; "), installGuidance)
}

func probeRuntime(ctx context.Context, name string) (*Runtime, string) {
	kind := strings.TrimSuffix(strings.ToLower(filepath.Base(name)), ".exe")
	if kind != "podman" && kind != "docker" {
		return nil, fmt.Sprintf("%s: not podman or docker", name)
	}
	path, err := exec.LookPath(name)
	if err != nil && name == kind {
		path, err = installedCLI(kind)
	}
	if err != nil {
		return nil, fmt.Sprintf("%s: not installed", name)
	}
	rt := &Runtime{Kind: kind, Path: path}
	var info []string
	if kind == "podman" {
		// info answers only when the engine does (a Podman machine's service, a remote one).
		var out string
		out, err = cli(ctx, path, "info", "--format", "{{.Version.Version}}|{{.Host.ServiceIsRemote}}|{{.Host.Security.Rootless}}|{{.Host.Arch}}|{{.Host.CPUs}}")
		info = fields(out, 5)
		rt.CPUs, _ = strconv.Atoi(info[4])
		rt.Version, rt.Arch = info[0], info[3]
		rt.Remote = info[1] == "true" || runtime.GOOS != "linux"
		rt.Rootless = os.Geteuid() != 0
		if rt.Remote {
			rt.Rootless = info[2] == "true"
		}
	} else {
		var out string
		out, err = cli(ctx, path, "version", "--format", "{{.Server.Version}}|{{range .Server.Components}}{{.Name}},{{end}}")
		v := fields(out, 2)
		rt.Version, rt.Engine = v[0], strings.TrimSuffix(v[1], ",")
		if err == nil {
			out, _ = cli(ctx, path, "info", "--format", "{{.CgroupDriver}}|{{.OperatingSystem}}|{{.SecurityOptions}}|{{.Architecture}}|{{.NCPU}}")
			info = fields(out, 5)
			rt.CPUs, _ = strconv.Atoi(info[4])
			h := os.Getenv("DOCKER_HOST")
			rt.Remote = runtime.GOOS != "linux" || strings.Contains(info[1], "Docker Desktop") || (h != "" && !strings.HasPrefix(h, "unix://"))
			rt.Rootless = strings.Contains(info[2], "rootless")
			rt.Arch = info[3]
			rt.CgroupParent = info[0] == "cgroupfs" && os.Geteuid() == 0
		}
	}
	if err != nil {
		return nil, fmt.Sprintf("%s does not answer: %v", name, err)
	}
	if kind == "podman" {
		rt.CgroupParent = !rt.Rootless
	}
	if rt.Remote {
		rt.CgroupParent = false
	}
	if rt.Arch == "" {
		rt.Arch = runtime.GOARCH
	}
	return rt, ""
}

// fields splits a CLI's "|"-separated answer into n fields, empty where it gave fewer.
func fields(out string, n int) []string {
	f := strings.SplitN(out, "|", n)
	for len(f) < n {
		f = append(f, "")
	}
	return f
}

// chooseOCI settles the OCI runtime. crun refuses a hybrid cgroup layout, so there podman
// gets runc when none is named and runc is installed; a named crun, or a default crun with no
// runc to fall back on, is a refusal that says what to do.
func (rt *Runtime) chooseOCI(ctx context.Context, named string) error {
	rt.OCIRuntime = named
	_, hybrid, detail := hostCgroups()
	if !hybrid || rt.Remote {
		return nil // an engine elsewhere runs on its own layout
	}
	refuse := func(which string) error {
		return failure.New(failure.BackendUnavailable, "%s cannot run containers on this host's hybrid cgroup layout (%s): "+
			"install runc (apt-get install runc) and leave container.oci_runtime empty, or name runc there", which, detail)
	}
	if named != "" {
		if filepath.Base(named) == "crun" {
			return refuse("crun")
		}
		return nil
	}
	if rt.Kind != "podman" {
		return nil // docker's daemon picks its runtime; runc is its default
	}
	if runc := findRunc(); runc != "" {
		rt.OCIRuntime, rt.OCINote = "runc", "crun refuses this host's hybrid cgroup layout"
		return nil
	}
	def, err := cli(ctx, rt.Path, "info", "--format", "{{.Host.OCIRuntime.Name}}")
	if err != nil {
		return failure.Wrap(failure.BackendUnavailable, err, "podman's OCI runtime is unknown: %v", err)
	}
	if def == "crun" {
		return refuse("podman's default OCI runtime, crun,")
	}
	return nil
}

func findRunc() string {
	if p, err := exec.LookPath("runc"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc", "/usr/local/bin/runc"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// imagePresent reports whether image is in the runtime's local store. It never pulls.
func imagePresent(ctx context.Context, rt *Runtime, image string) (bool, error) {
	_, err := cli(ctx, rt.Path, "image", "inspect", "--format", "{{.Id}}", image)
	if err == nil {
		return true, nil
	}
	if msg := err.Error(); strings.Contains(msg, "not known") || strings.Contains(msg, "No such image") ||
		strings.Contains(msg, "no such image") || strings.Contains(msg, "not found") {
		return false, nil
	}
	return false, err
}

// ImageGuidance is the refusal for an image that is not present: the exact command to get it.
func ImageGuidance(rt *Runtime, image string) string {
	get := fmt.Sprintf("%q", rt.Kind+" pull "+image)
	if strings.HasPrefix(image, DefaultImageName+":") {
		build := "mcp-sandbox image build"
		if rt.Kind == "docker" {
			build += " --runtime docker"
		}
		if image != DefaultImage {
			build += " --tag " + image
		}
		get = fmt.Sprintf("%q (it builds the image from this host's Python and pulls nothing)", build)
	}
	return fmt.Sprintf("the image %s is not in %s's local store, and images are never pulled implicitly: run %s", image, rt.Kind, get)
}
