//go:build !linux

package claudecode

// inLoopbackNetns fails where there are no network namespaces.
func inLoopbackNetns(func() error) error {
	return netnsError{"network namespaces are Linux's"}
}
