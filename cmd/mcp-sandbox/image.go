package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"

	"github.com/mcp-sandbox/mcp-sandbox/cmd/mcp-sandbox/internal/early"
	"github.com/mcp-sandbox/mcp-sandbox/internal/hostimage"
)

// The images `mcp-sandbox image build` makes, by kind: the container backend's (sandbox), and
// the two deploy/kubernetes runs (server, worker). deploy/k8stest checks that the manifests
// name these (as the command's --help prints them).
var imageNames = map[string]string{
	"sandbox": "localhost/mcp-sandbox-python",
	"server":  "localhost/mcp-sandbox-server",
	"worker":  "localhost/mcp-sandbox-worker",
}

func runImage(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w := stdout
		if len(args) == 0 {
			w = stderr
		}
		fmt.Fprint(w, imageUsage())
		if len(args) == 0 {
			return exitUsage, usagef("names no subcommand: image build")
		}
		return exitOK, nil
	}
	if args[0] != "build" {
		return exitUsage, usagef("unknown subcommand %q: image build is the one there is", args[0])
	}
	fs, _ := commandFlags("image build", imageUsage(), stdout, stderr)
	fs.MarkHidden("config")
	runtime := fs.String("runtime", "", "podman or docker (a name on PATH or a path); default: podman, else docker")
	python := fs.String("python", "/usr/bin/python3", "the interpreter the image carries (sandbox and worker)")
	var tags []string
	fs.StringArrayVar(&tags, "tag", nil, "the image's reference, name:tag (repeatable); default: localhost/mcp-sandbox-<kind>:<version> and :latest")
	kind := fs.String("image", "sandbox", "which image: sandbox (the container backend's), server or worker (deploy/kubernetes's)")
	if answered, code, err := parseFlags(fs, args[1:]); answered {
		return code, err
	}
	if fs.NArg() != 0 {
		return exitUsage, usagef("takes no arguments, got %q", fs.Args())
	}
	name, ok := imageNames[*kind]
	if !ok {
		return exitUsage, usagef("--image must be sandbox, server or worker, got %q", *kind)
	}
	spec := hostimage.Spec{Kind: *kind, Python: *python, Tags: tags}
	if len(spec.Tags) == 0 {
		spec.Tags = []string{name + ":" + imageTag(early.Version), name + ":latest"}
	}
	for _, t := range spec.Tags {
		if !imageRef().MatchString(t) {
			return exitUsage, usagef("--tag %q is not an image reference (name:tag, the tag of letters, digits, '_', '.', '-')", t)
		}
	}
	var err error
	if spec.Runtime, err = findRuntime(*runtime); err != nil {
		return exitUsage, err
	}
	if spec.Kind != "server" {
		if _, err := exec.LookPath(spec.Python); err != nil {
			return exitUsage, usagef("--python %s: %v", spec.Python, err)
		}
	}
	if spec.Kind != "sandbox" {
		if spec.Binary, err = os.Executable(); err != nil {
			return exitFailure, fmt.Errorf("finding this binary to copy into the image: %w", err)
		}
	}
	if err := hostimage.Build(ctx, spec, stderr); err != nil {
		return exitFailure, err
	}
	fmt.Fprintf(stdout, "%s\n", strings.Join(spec.Tags, "\n"))
	return exitOK, nil
}

// imageRef is name[:tag] as a runtime accepts it, the tag required here; compiled at its
// first use, not at every command's start (docs/design.md §19.10).
var imageRef = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9]+([._/:-]?[a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]?[a-z0-9]+)*)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
})

// imageTag is a version as an image tag: what a tag may not hold becomes '-'.
func imageTag(version string) string {
	t := regexp.MustCompile(`[^A-Za-z0-9_.-]`).ReplaceAllString(version, "-")
	if t == "" || t[0] == '.' || t[0] == '-' {
		t = "v" + t
	}
	return t[:min(len(t), 128)]
}

// findRuntime is the named runtime, or podman, else docker, on PATH.
func findRuntime(name string) (string, error) {
	names := []string{"podman", "docker"}
	if name != "" {
		names = []string{name}
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	if name != "" {
		return "", usagef("--runtime %q is not on PATH", name)
	}
	return "", usagef("neither podman nor docker is on PATH: install one (apt-get install podman), or name it with --runtime")
}

func imageUsage() string {
	return fmt.Sprintf(`Usage: mcp-sandbox image build [--runtime podman|docker] [--python PATH] [--tag T]... [--image sandbox|server|worker]

Builds an image from this machine's own files and imports it into podman's or docker's local
store. Nothing is pulled and no registry is reached; the image holds what the kind needs and
nothing else (no shell, no package manager). It is then tried once, in a container with no
network, before the command says it is built.

  sandbox  (the default) the container backend's image: the interpreter --python names, the
           shared libraries it and its extension modules load, its standard library (without
           tests, IDLE, Tk, ensurepip, site-packages), a passwd naming nobody, and no
           entrypoint (the backend names the interpreter). A profile with backend: container
           runs %[1]s:latest unless it names another image.
  server   this mcp-sandbox binary as the entrypoint, the libraries it loads and the system's
           CA certificates: what deploy/kubernetes/20-server.yaml runs (%[2]s).
  worker   the server's contents and the sandbox's Python: what
           deploy/kubernetes/30-workers.yaml runs (%[3]s), sandbox-service running programs
           on its namespaces backend.

Default tags: <name>:%[4]s (this build's version) and <name>:latest. The manifests name :latest
with imagePullPolicy IfNotPresent, so a node runs the image imported into it; push to a registry
of yours and name it there for a cluster that pulls. Builds on Linux, from its own files.

Examples:
  mcp-sandbox image build                          # then: mcp-sandbox doctor --config container.yaml
  mcp-sandbox image build --python /opt/venv/bin/python --tag localhost/my-python:1
  mcp-sandbox image build --image worker --runtime docker
`, imageNames["sandbox"], imageNames["server"], imageNames["worker"], imageTag(early.Version))
}
