package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// npmScope is the scope of every npm package (the unscoped name mcp-sandbox belongs to
// another project on the registry); npmMain the one users name: npx -y @mcp-sandbox/mcp-sandbox.
const (
	npmScope = "@mcp-sandbox"
	npmMain  = npmScope + "/mcp-sandbox"
)

// npmPlatform is the platform package's name.
func npmPlatform(p platform) string { return npmScope + "/" + p.npmOS + "-" + p.npmCPU }

// launcher is the main package's bin: it finds this machine's platform package and runs its
// binary with the arguments given, standard streams inherited (an MCP host's stdio goes
// straight to the binary, not through Node), signals passed on, and its exit status (or its
// signal) as its own.
const launcher = `#!/usr/bin/env node
// mcp-sandbox's launcher (npm package ` + npmMain + `): runs the binary of this machine's
// platform package, installed beside this one as an optional dependency.
"use strict";
const { spawn } = require("node:child_process");

const pkg = "` + npmScope + `/" + process.platform + "-" + process.arch;
const exe = process.platform === "win32" ? "mcp-sandbox.exe" : "mcp-sandbox";
let bin;
try {
  bin = require.resolve(pkg + "/bin/" + exe);
} catch (e) {
  console.error("mcp-sandbox: no binary for " + process.platform + "/" + process.arch + ": the package " + pkg +
    " is not installed. It is an optional dependency of ` + npmMain + `, installed only on its own platform;" +
    " one installed with --omit=optional or --no-optional lacks it. Builds exist for linux, darwin and win32 on x64 and arm64.");
  process.exit(1);
}
const child = spawn(bin, process.argv.slice(2), { stdio: "inherit", windowsHide: true });
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => child.kill(sig));
}
child.on("error", (e) => {
  console.error("mcp-sandbox: could not run " + bin + ": " + e.message);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code === null ? 1 : code);
});
`

// packageJSON is the part of package.json written here.
type packageJSON struct {
	Name                 string            `json:"name"`
	Version              string            `json:"version"`
	Description          string            `json:"description"`
	Homepage             string            `json:"homepage"`
	Repository           map[string]string `json:"repository"`
	OS                   []string          `json:"os,omitempty"`
	CPU                  []string          `json:"cpu,omitempty"`
	Bin                  map[string]string `json:"bin,omitempty"`
	Files                []string          `json:"files"`
	OptionalDependencies map[string]string `json:"optionalDependencies,omitempty"`
	Engines              map[string]string `json:"engines,omitempty"`
}

// stageNPM writes each package's directory under dir: the platform packages' (package.json,
// bin/<exe>, README.md) and the main package's (package.json, bin/mcp-sandbox.js, README.md).
func stageNPM(dir, version string, ps []platform) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	repo := map[string]string{"type": "git", "url": "git+" + homepage + ".git"}
	deps := map[string]string{}
	for _, p := range ps {
		name := npmPlatform(p)
		deps[name] = version
		pkgDir := filepath.Join(dir, p.npmOS+"-"+p.npmCPU)
		if err := copyFile(p.path, filepath.Join(pkgDir, "bin", p.exe()), 0o755); err != nil {
			return err
		}
		if err := writePackage(pkgDir, packageJSON{
			Name: name, Version: version, Homepage: homepage, Repository: repo,
			Description: fmt.Sprintf("The %s %s binary of %s, which installs it on that platform only.", p.npmOS, p.npmCPU, npmMain),
			OS:          []string{p.npmOS}, CPU: []string{p.npmCPU}, Files: []string{"bin/" + p.exe(), "README.md"},
		}, fmt.Sprintf("# %s\n\nThe %s/%s binary of [%s](%s) (version %s). Install %s instead: npm picks this package on its platform.\n",
			name, p.npmOS, p.npmCPU, npmMain, homepage, version, npmMain)); err != nil {
			return err
		}
	}
	top := filepath.Join(dir, "mcp-sandbox")
	if err := os.MkdirAll(filepath.Join(top, "bin"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(top, "bin", "mcp-sandbox.js"), []byte(launcher), 0o755); err != nil {
		return err
	}
	readme := fmt.Sprintf(`# %[1]s

%[2]s

Version %[3]s, from %[4]s. In an MCP host, one line:

    claude mcp add sandbox -- npx -y %[1]s serve

or in a host's JSON config: {"command": "npx", "args": ["-y", "%[1]s", "serve"]}. One program
from a shell: echo '6*7' | npx -y %[1]s run -

The binary comes in the platform package npm installs beside this one (%[5]s-<os>-<cpu>,
for linux, darwin and win32 on x64 and arm64); nothing is downloaded after install. Programs
run under the machine's python3. The project's README says what each platform enforces.
`, npmMain, description, version, homepage, npmScope)
	return writePackage(top, packageJSON{
		Name: npmMain, Version: version, Description: description, Homepage: homepage, Repository: repo,
		Bin: map[string]string{"mcp-sandbox": "bin/mcp-sandbox.js"}, Files: []string{"bin/mcp-sandbox.js", "README.md"},
		OptionalDependencies: deps, Engines: map[string]string{"node": ">=18"},
	}, readme)
}

func writePackage(dir string, pj packageJSON, readme string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(pj, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme), 0o644)
}

func copyFile(from, to string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
