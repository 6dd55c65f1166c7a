package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// workspaceTar, run by the image's interpreter in the container as the execution's identity,
// writes the workspace (its one argument) to stdout as a tar stream: each directory's entries
// sorted, links and special files as headers without content, no link followed, at most
// 10001 entries (the engine reads no more).
const workspaceTar = `import os, sys, tarfile
root = sys.argv[1]
out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT)
n = 0
def walk(rel):
    global n
    for name in sorted(os.listdir(os.path.join(root, rel))):
        n += 1
        if n > 10001:
            return
        path, arc = os.path.join(root, rel, name), os.path.join(rel, name)
        info = out.gettarinfo(path, arcname=arc)
        if info.isreg():
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as f:
                out.addfile(info, f)
        else:
            out.addfile(info)
        if info.isdir():
            walk(arc)
walk("")
out.close()`

// WorkspaceArchive hands the engine the workspace of a container whose root no path of this
// host reaches (an engine in a VM, or a daemon's containers outside this pid namespace): an
// exec in the container streams it (engine.WorkspaceArchiver). The interpreter is waiting
// after done, so the container and its tmpfs are still there. Closing the stream ends the
// exec.
func (c *child) WorkspaceArchive(ctx context.Context) (io.ReadCloser, error) {
	if c.Workspace() != "" {
		return nil, errors.New("the workspace is a host path")
	}
	cmd := exec.CommandContext(ctx, c.b.rt.Path, "exec", "--user", strconv.Itoa(c.uid)+":"+strconv.Itoa(c.gid),
		c.name, c.b.opts.Python, "-I", "-c", workspaceTar, c.workspace)
	cmd.WaitDelay = cliWaitDelay
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s exec: %v", c.b.rt.Kind, err)
	}
	return &execStream{ReadCloser: out, cmd: cmd}, nil
}

// execStream is an exec's stdout; Close ends the exec and reaps it.
type execStream struct {
	io.ReadCloser
	cmd  *exec.Cmd
	once sync.Once
}

// tarRecord is what a tar writer may still write after the end of the archive a reader has
// seen (padding to its record size): drained, so an exec that ended its archive ends itself.
const tarRecord = 20 << 10

func (s *execStream) Close() error {
	s.once.Do(func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(s.ReadCloser, tarRecord))
		exited := make(chan struct{})
		go func() {
			_ = s.cmd.Wait()
			close(exited)
		}()
		select {
		case <-exited:
		case <-time.After(cliWaitDelay):
			_ = s.cmd.Process.Kill()
			<-exited
		}
	})
	return nil
}
