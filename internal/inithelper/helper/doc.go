// Command helper is mcp-sandbox's init helper alone: internal/launch and nothing else, built by
// ../overlay for mcp-sandbox to embed (docs/design.md §19.1). Its start is launch's
// initialiser, which runs the helper and never returns when argv[1] is launch.Command; main
// is reached only when someone runs the file by hand. It imports internal/launch only.
package main
