//go:build !linux

package sandboxtest

func removeSysV(int) {}
