//go:build !linux

package inithelper

import "io/fs"

// resolve: only the Linux backends exec the helper on its own; elsewhere it is this binary.
func resolve(fs.FS) Helper {
	return Helper{Why: "the init helper alone is built for Linux only"}
}
