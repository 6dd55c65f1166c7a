package main

// localAdvice follows a refusal of `backend: local`: no local backend of this build runs a
// program inside a kernel boundary on Windows (docs/design.md §4.1).
const localAdvice = "on Windows, use a remote backend (mcp-sandbox sandbox-service on a Linux host), or lower the profile's isolation to process"
