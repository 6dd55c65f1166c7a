package container

import "errors"

// usernsLeases: Windows has no flock to lease the blocks with across servers, so executions
// run in the engine's own user namespace (a rootless Podman machine's) or none (a rootful
// one, Docker Desktop's): Facts.UserNamespace says which it is not.
const usernsLeases = false

type idBlock struct{ First uint32 }

func (b *idBlock) Release() {}

func leaseIDBlock() (*idBlock, error) { return nil, errors.New("no user namespace leases on Windows") }
