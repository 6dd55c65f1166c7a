package container

const (
	// ownerPrefix names a Backend's owner id (owner_linux.go, owner_other.go), which names its
	// directory ("mcp-sandbox-" + id), its containers and their cgroups.
	ownerPrefix = "ctr"
	// OwnerLabel is the label every container of this backend carries: its owner's id.
	OwnerLabel = "io.mcp-sandbox.owner"
)

// rmArgs removes containers at once, their anonymous volumes included.
func rmArgs(rt *Runtime) []string {
	if rt.Kind == "podman" {
		return []string{"rm", "--force", "--volumes", "--time", "0", "--ignore"}
	}
	return []string{"rm", "--force", "--volumes"}
}
