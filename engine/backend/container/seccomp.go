package container

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// profileVolume is the named volume of a podman engine elsewhere (a Podman machine's) that
// holds the policy's profiles: podman reads a seccomp profile only from a path on its own
// host, and a volume's mountpoint is one, reached without mounting any path of a host. Its
// files are named by their content's digest, so every server of every version shares it.
const profileVolume = "mcp-sandbox-seccomp"

// profileWriter, run by the image's interpreter with the volume at /profiles, writes each
// profile it reads (a JSON object of file names and contents) unless the file holds it already,
// and prints the digest of what each file holds afterwards.
const profileWriter = `import hashlib, json, os, sys
want, out = json.load(sys.stdin), {}
for name, text in sorted(want.items()):
    path, data = "/profiles/" + name, text.encode()
    try:
        with open(path, "rb") as f:
            have = f.read()
    except FileNotFoundError:
        have = None
    if have != data:
        tmp = "%s.%d" % (path, os.getpid())
        with open(tmp, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    with open(path, "rb") as f:
        out[name] = hashlib.sha256(f.read()).hexdigest()
print(json.dumps(out))`

// placeProfiles writes the policy's two profiles (seccomp.OCIProfile, for the engine's
// architecture) where the runtime reads them and returns what each run names after seccomp=:
// [0] for terms that grant network, [1] for network none. docker's CLI reads the file in dir
// and sends its content; podman's runs read a path on the engine's host, which for an engine
// elsewhere is a file in profileVolume, written through the engine by the image's own
// interpreter and checked by its digest.
func placeProfiles(ctx context.Context, rt *Runtime, opts Options, dir string) ([2]string, error) {
	var out [2]string
	contents := map[string]string{}
	for i, networkNone := range []bool{false, true} {
		path, content, err := writeProfile(dir, networkNone, rt.Arch)
		if err != nil {
			return out, failure.Wrap(failure.BackendUnavailable, err, "writing the seccomp profile failed: %v", err)
		}
		out[i] = path
		if rt.Remote && rt.Kind == "podman" {
			sum := sha256.Sum256(content)
			name := hex.EncodeToString(sum[:16]) + ".json"
			contents[name] = string(content)
			out[i] = name
		}
	}
	if len(contents) == 0 {
		return out, nil
	}
	mountpoint, err := engineProfiles(ctx, rt, opts, contents)
	if err != nil {
		return out, failure.Wrap(failure.BackendUnavailable, err, "the seccomp profiles could not be placed on the engine's host "+
			"(podman reads a profile only from there): %v", err)
	}
	for i := range out {
		out[i] = mountpoint + "/" + out[i]
	}
	return out, nil
}

// engineProfiles makes profileVolume if it is missing, writes contents into it, checks each
// file's digest and returns the volume's mountpoint on the engine's host.
func engineProfiles(ctx context.Context, rt *Runtime, opts Options, contents map[string]string) (string, error) {
	mountpoint, err := cli(ctx, rt.Path, "volume", "inspect", "--format", "{{.Mountpoint}}", profileVolume)
	if err != nil {
		if _, err := cli(ctx, rt.Path, "volume", "create", "--label", "io.mcp-sandbox.seccomp=1", profileVolume); err != nil {
			return "", err
		}
		if mountpoint, err = cli(ctx, rt.Path, "volume", "inspect", "--format", "{{.Mountpoint}}", profileVolume); err != nil {
			return "", err
		}
	}
	in, err := json.Marshal(contents)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()
	// The writer is the image's interpreter running this fixed script, as root of the
	// container (the engine's user) and with nothing else: no network, no capabilities, a
	// read-only root. label=disable: a volume podman made has no label the container may
	// write under SELinux (a Podman machine enforces it), and relabelling is not ours to do.
	args := []string{"run", "--rm", "--interactive", "--pull=never", "--log-driver=none",
		"--network=none", "--cap-drop=all", "--security-opt=no-new-privileges", "--security-opt=label=disable",
		"--read-only", "--user", "0:0", "--ulimit", "nofile=1024:1024"}
	if n := nprocLimit(rt, 64); n > 0 {
		args = append(args, "--ulimit", "nproc="+strconv.FormatUint(n, 10)+":"+strconv.FormatUint(n, 10))
	}
	args = append(args, "--volume", profileVolume+":/profiles:rw", "--entrypoint", opts.Python, opts.Image, "-I", "-c", profileWriter)
	cmd := exec.CommandContext(ctx, rt.Path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	cmd.WaitDelay = cliWaitDelay
	if err := cmd.Run(); err != nil {
		msg, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		return "", fmt.Errorf("the writer in %s failed: %v: %s", opts.Image, err, msg)
	}
	var got map[string]string
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		return "", fmt.Errorf("the writer's answer %q: %v", stdout.String(), err)
	}
	for name, content := range contents {
		sum := sha256.Sum256([]byte(content))
		if got[name] != hex.EncodeToString(sum[:]) {
			return "", fmt.Errorf("%s holds other content than the policy's after it was written", name)
		}
	}
	return mountpoint, nil
}
