// Package python finds an interpreter the sandbox identity can actually execute, asks it for
// the directories it reads at run time (for Landlock rules and read-only mounts), and has it
// compile the bootstrap once, so no child pays for compiling it again (Info.Argv hands the
// compiled code over instead of the text). Asking means starting the interpreter, which costs
// as much as a one-shot program: InspectCached remembers the answer in the data dir, stamped
// with what could change it (the interpreter's file, the directories, the site directories'
// .pth files, the source) and for a day at most.
//
// "Can execute" is checked along the whole path, for the identity that will run it: an
// interpreter under a 0700 home (pyenv under /root, say) is on the host's PATH but not one the
// sandbox can start, so it is passed over for the next candidate.
//
// It imports the standard library only; results are plain values.
package python
