//go:build !linux

package gate

// InOwnPIDNamespace is false where there are no pid namespaces.
func InOwnPIDNamespace() bool { return false }

// Main returns at once where there are no pid namespaces.
func Main() {}

func becomeSubreaper() error { return nil }

// Ours returns whether a pid belongs to this test binary's processes: here, every one.
func Ours() func(pid int) bool { return func(int) bool { return true } }
