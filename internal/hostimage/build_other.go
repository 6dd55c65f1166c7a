//go:build !linux

package hostimage

import (
	"context"
	"errors"
	"io"
)

// Build assembles an image from this host's own files, which only a Linux host has for a
// Linux container (docs/design.md §20).
func Build(context.Context, Spec, io.Writer) error {
	return errors.New("image build assembles the image from this machine's own Python and libraries, which must be Linux's: run it on a Linux machine, or build engine/backend/container/image/Containerfile with your runtime")
}
