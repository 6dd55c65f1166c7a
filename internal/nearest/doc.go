// Package nearest finds the known name a misspelt one was meant to be: a config key, a
// command, a flag's key, a tool's argument. It is the one edit distance of the tree, so
// every "did you mean" says the same.
//
// It imports the standard library only. Name is a pure function, safe for concurrent use;
// its cost is bounded by maxNameBytes whatever a hostile upstream names its arguments.
package nearest
