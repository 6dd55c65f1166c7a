//go:build !linux

package owner

// LockDirProblem is "" here: there are no owner tags and no lock directory off Linux.
func LockDirProblem() string { return "" }
