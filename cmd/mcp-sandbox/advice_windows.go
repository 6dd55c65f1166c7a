package main

// localAdvice follows a refusal of `backend: local`: on Windows only a container engine's VM
// gives a kernel boundary (docs/design.md §4.1).
const localAdvice = "start Docker Desktop or a Podman machine (podman machine start) with the sandbox image built " +
	"(mcp-sandbox image build), or use a remote backend (mcp-sandbox sandbox-service on a Linux host), or lower the profile's isolation to process"
