package spawned

// Tmpfs sizes the workspace and /tmp of a local backend that mounts its own (namespaces,
// bwrap, container); a backend's Options embed it.
type Tmpfs struct {
	// WorkspaceBytes sizes the tmpfs workspace (default 64 MiB); TmpBytes the /tmp (16 MiB).
	WorkspaceBytes, TmpBytes int64
}

// Sized returns t with its unset sizes at their defaults.
func (t Tmpfs) Sized() Tmpfs {
	if t.WorkspaceBytes <= 0 {
		t.WorkspaceBytes = 64 << 20
	}
	if t.TmpBytes <= 0 {
		t.TmpBytes = 16 << 20
	}
	return t
}
