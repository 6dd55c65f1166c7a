package hostimage

// Spec is one image to build.
type Spec struct {
	Kind    string   // sandbox, server or worker
	Runtime string   // the podman or docker binary
	Python  string   // the interpreter copied in (sandbox, worker)
	Binary  string   // this executable, copied in as the entrypoint (server, worker)
	Tags    []string // full references; the first is imported, the rest tag it
}
