// Stages mcp-sandbox.mcpb's directory from make dist's dist/ (make bundle): the binaries
// it built, by platform (artifacts.json), the launcher, the bundle's config, and manifest.json with
// the release's version. Usage: node stage.mjs DIST STAGE
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const [dist, stage] = process.argv.slice(2);
if (!dist || !stage) {
  console.error("usage: node stage.mjs DIST STAGE");
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const artifacts = JSON.parse(readFileSync(join(dist, "artifacts.json"), "utf8"));
const { version } = JSON.parse(readFileSync(join(dist, "metadata.json"), "utf8"));

// macOS and Linux pick their architecture in launch.sh; Windows runs the amd64 binary, which
// Windows on Arm runs too (the manifest can name one command per platform only).
const wanted = ["darwin-amd64", "darwin-arm64", "linux-amd64", "linux-arm64", "windows-amd64"];
rmSync(stage, { recursive: true, force: true });
const server = join(stage, "server");
const found = new Set();
for (const a of artifacts) {
  const key = `${a.goos}-${a.goarch}`;
  if (a.type !== "Binary" || !wanted.includes(key)) continue;
  const to = join(server, key, a.goos === "windows" ? "mcp-sandbox.exe" : "mcp-sandbox");
  mkdirSync(dirname(to), { recursive: true });
  copyFileSync(a.path, to);
  chmodSync(to, 0o755);
  found.add(key);
}
const missing = wanted.filter((k) => !found.has(k));
if (missing.length > 0) {
  console.error(`stage.mjs: ${dist}/artifacts.json has no binary for ${missing.join(", ")}; run make dist first`);
  process.exit(1);
}
copyFileSync(join(here, "launch.sh"), join(server, "launch.sh"));
chmodSync(join(server, "launch.sh"), 0o755);
copyFileSync(join(here, "config.yaml"), join(server, "config.yaml"));
const manifest = JSON.parse(readFileSync(join(here, "manifest.json"), "utf8"));
manifest.version = version;
writeFileSync(join(stage, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n");
console.error(`staged ${stage}: mcp-sandbox ${version} for ${wanted.join(", ")}`);
