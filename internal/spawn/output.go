package spawn

import (
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// Output is a child's stdout and stderr where no init helper bounds them (the macOS and
// Windows backends): a pipe each, whose read end a goroutine of its own copies to a writer.
// The zero Output is ready; Attach is called once, Close after the child is reaped.
type Output struct {
	copies sync.WaitGroup
	reads  []*os.File // the host's read ends
}

// Attach sets cmd.Stdout and cmd.Stderr to the write ends of two pipes whose read ends are
// copied to stdout and stderr (nil discards). The caller closes the write ends (closeWrites)
// once cmd has started or failed to, so the copies end with the child's last writer.
func (o *Output) Attach(cmd *exec.Cmd, stdout, stderr io.Writer) (closeWrites func(), err error) {
	var writes []*os.File
	closeWrites = func() {
		for _, w := range writes {
			w.Close()
		}
	}
	for _, dst := range []io.Writer{stdout, stderr} {
		r, w, err := os.Pipe()
		if err != nil {
			return closeWrites, err
		}
		writes = append(writes, w)
		o.reads = append(o.reads, r)
		if dst == nil {
			dst = io.Discard
		}
		o.copies.Add(1)
		go func() {
			defer o.copies.Done()
			_, _ = io.Copy(dst, r)
		}()
	}
	cmd.Stdout, cmd.Stderr = writes[0], writes[1]
	return closeWrites, nil
}

// Close waits up to grace for the copies to reach the end of their pipes (a process outside
// the host's reach may still hold one), then closes the read ends.
func (o *Output) Close(grace time.Duration) {
	copied := make(chan struct{})
	go func() { o.copies.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(grace):
	}
	for _, r := range o.reads {
		r.Close()
	}
}
