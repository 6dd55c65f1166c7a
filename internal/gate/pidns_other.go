//go:build !linux

package gate

// InOwnPIDNamespace is false where there are no pid namespaces.
func InOwnPIDNamespace() bool { return false }

// Main returns at once where there are no pid namespaces.
func Main() {}
