package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxStderrLine bounds one logged stderr line of a stdio server; the rest of a longer line is
// dropped.
const maxStderrLine = 4096

// process is a running stdio server. The go-sdk's CommandTransport has a fixed frame limit and
// no stderr capture, so the pipes are ours and the SDK sees them through an IOTransport.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // our write end
	stdout *os.File // our read end
	exited chan struct{}
	wg     sync.WaitGroup // the stderr reader and the reaper
	once   sync.Once
}

// startProcess starts s.Command with the environment described in docs/design.md §13.6.
func startProcess(s Server, logger *slog.Logger) (*process, error) {
	cmd := exec.Command(s.Command[0], s.Command[1:]...)
	cmd.Dir = s.Dir
	cmd.Env = childEnv(s.Env)
	setProcessGroup(cmd)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, err
	}
	closeAll(inR, outW, errW)
	p := &process{cmd: cmd, stdin: inW, stdout: outR, exited: make(chan struct{})}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		logStderr(errR, s.Name, logger)
		_ = errR.Close()
	}()
	go func() {
		defer p.wg.Done()
		err := cmd.Wait()
		if err != nil {
			logger.Warn("upstream server exited", "server", s.Name, "err", err)
		}
		close(p.exited)
	}()
	return p, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

func childEnv(extra map[string]string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			if _, over := extra[k]; !over {
				env = append(env, k+"="+v)
			}
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

func logStderr(r io.Reader, server string, logger *slog.Logger) {
	br := bufio.NewReaderSize(r, maxStderrLine)
	for {
		line, isPrefix, err := br.ReadLine()
		if len(line) > 0 || (err == nil && !isPrefix) {
			logger.Info("upstream stderr", "server", server, "line", string(line))
		}
		for isPrefix && err == nil { // drop the rest of an over-long line
			_, isPrefix, err = br.ReadLine()
		}
		if err != nil {
			return
		}
	}
}

// transport returns the go-sdk transport over p's pipes; closing it closes the process.
func (p *process) transport(maxFrame int) mcp.Transport {
	return &stdioTransport{r: processReader{p}, w: processCloser{p}, close: p.close, limit: maxFrame}
}

// processReader reads the server's stdout. go-sdk closes the reader before the writer; were
// that the pipe itself, a server still writing as its stdin closes would die of SIGPIPE (and
// be logged as a failure). p.close closes stdout itself, once the process is gone.
type processReader struct{ p *process }

func (r processReader) Read(b []byte) (int, error) { return r.p.stdout.Read(b) }
func (r processReader) Close() error               { return nil }

type processCloser struct{ p *process }

func (c processCloser) Write(b []byte) (int, error) { return c.p.stdin.Write(b) }
func (c processCloser) Close() error                { c.p.close(); return nil }

// close ends the process: close stdin and let it exit, then kill its group. It is bounded by
// about 2*closeGrace, idempotent and safe for concurrent use.
func (p *process) close() {
	p.once.Do(func() {
		_ = p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(closeGrace):
			killProcessGroup(p.cmd)
			select {
			case <-p.exited:
			case <-time.After(closeGrace):
			}
		}
		_ = p.stdout.Close()
		done := make(chan struct{})
		go func() { p.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(closeGrace): // a grandchild holds stderr open; give up on it
		}
	})
}

// exitedWithin reports whether the process has exited, or does within d.
func (p *process) exitedWithin(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// exitSettle is how long a failed handshake waits to learn whether the server exited.
const exitSettle = 200 * time.Millisecond

// errProcessExited is what a connect reports when the server exits during initialize.
var errProcessExited = errors.New("the server process exited")

// watch returns a context cancelled when p exits, for bounding connect. Its cancel function
// also waits for the goroutine that watches.
func (p *process) watch(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-p.exited:
			cancel(errProcessExited)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil); <-done }
}
