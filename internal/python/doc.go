// Package python finds an interpreter the sandbox identity can actually execute, and the
// directories it reads at run time (for Landlock rules and read-only mounts).
//
// "Can execute" is checked along the whole path, for the identity that will run it: an
// interpreter under a 0700 home (pyenv under /root, say) is on the host's PATH but not one the
// sandbox can start, so it is passed over for the next candidate.
//
// It imports the standard library only; results are plain values.
package python
