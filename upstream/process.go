package upstream

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxStderrLine bounds one logged stderr line of a stdio server; the rest of a longer line is
// dropped.
const maxStderrLine = 4096

// Launcher starts a stdio server's Command contained. Env is the server's configured
// environment (the launcher builds the rest from nothing).
type Launcher func(ctx context.Context, command []string, env map[string]string) (*Launched, error)

// Launched is a stdio server a Launcher started: its stdin and stdout (Close on Stdin ends
// the server's input only), its stderr (read to its end), and its tree's end.
type Launched struct {
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	Stderr io.Reader
	// Wait blocks until the server's main process has exited.
	Wait func() error
	// Kill kills the server's whole tree; Release, after it, removes what the launcher made.
	// Both are idempotent.
	Kill, Release func()
}

// process is a running stdio server. The go-sdk's CommandTransport has a fixed frame limit and
// no stderr capture, so the pipes are ours and the SDK sees them through an IOTransport.
type process struct {
	cmd *exec.Cmd
	// marker is the value of treeMarkerEnv in the server's environment, which its descendants
	// inherit: what finds one that left the process group and its parent (killTree).
	marker string
	stdin  io.WriteCloser // our write end
	stdout io.ReadCloser  // our read end
	exited chan struct{}
	wg     sync.WaitGroup // the stderr reader and the reaper
	once   sync.Once
	// ending is set when close begins: an exit after it (a kill included) is the end asked
	// for, not a failure of the server's.
	ending atomic.Bool

	// contained is the server's launch when a Launcher started it, nil for a host process.
	contained *Launched
}

// startProcess starts s.Command with the environment described in docs/design.md §13.6.
func startProcess(s Server, logger *slog.Logger) (*process, error) {
	if s.Launch != nil {
		return startContained(s, logger)
	}
	cmd := exec.Command(s.Command[0], s.Command[1:]...)
	cmd.Dir = s.Dir
	marker := newMarker()
	cmd.Env = append(childEnv(s.Env), treeMarkerEnv+"="+marker)
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
	p := &process{cmd: cmd, marker: marker, stdin: inW, stdout: outR, exited: make(chan struct{})}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		logStderr(errR, s.Name, logger)
		_ = errR.Close()
	}()
	go func() {
		defer p.wg.Done()
		p.logExit(cmd.Wait(), s.Name, logger)
		close(p.exited)
	}()
	return p, nil
}

// startContained starts s.Command through s.Launch: its tree lives and dies in a sandbox.
func startContained(s Server, logger *slog.Logger) (*process, error) {
	l, err := s.Launch(context.Background(), s.Command, s.Env)
	if err != nil {
		return nil, err
	}
	p := &process{contained: l, stdin: l.Stdin, stdout: l.Stdout, exited: make(chan struct{})}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		if l.Stderr != nil {
			logStderr(l.Stderr, s.Name, logger)
		}
	}()
	go func() {
		defer p.wg.Done()
		p.logExit(l.Wait(), s.Name, logger)
		close(p.exited)
	}()
	return p, nil
}

// logExit logs a server's exit: a failure (a warning) when it ended on its own with an error,
// the normal end (info) when close had begun, whatever its status (a server that did not
// leave when its stdin closed is killed).
func (p *process) logExit(err error, server string, logger *slog.Logger) {
	switch {
	case p.ending.Load():
		logger.Info("upstream server stopped", "server", server, "status", exitStatus(err))
	case err != nil:
		logger.Warn("upstream server exited", "server", server, "err", err)
	}
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// treeMarkerEnv names the variable that marks a stdio server's processes, so that killTree
// finds every one of them, even one that started its own session and lost its parent.
const treeMarkerEnv = "MCP_SANDBOX_UPSTREAM_TREE"

func newMarker() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// kill ends the server's whole process tree at once (killTree); close still reaps it. Once
// the server itself has exited, what is left of its tree (its group, the processes marked as
// its own) is killed without signalling its reaped pid.
func (p *process) kill() {
	if p.contained != nil {
		p.contained.Kill()
		return
	}
	select {
	case <-p.exited:
		killTree(p.cmd, p.marker, false)
	default:
		killTree(p.cmd, p.marker, true)
	}
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

// close ends the process: close stdin and let it exit, then kill its tree. It is bounded by
// about 2*closeGrace, idempotent and safe for concurrent use.
func (p *process) close() {
	p.once.Do(func() {
		p.ending.Store(true)
		_ = p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(closeGrace):
			p.kill()
			select {
			case <-p.exited:
			case <-time.After(closeGrace):
			}
		}
		p.kill() // helpers it left behind: nothing of a closed server's tree stays
		_ = p.stdout.Close()
		if p.contained != nil {
			p.contained.Release()
		}
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

// startProgressEvery is how often a start still waiting for initialize is logged.
const startProgressEvery = 10 * time.Second

// watch returns a context cancelled when p exits, for bounding connect. While it waits it
// logs the start's progress every startProgressEvery, and when ctx ends with a
// startTimeoutError it kills the server's whole tree at once, before the handshake gives up.
// Its cancel function also waits for the goroutine that watches.
func (p *process) watch(ctx context.Context, server string, logger *slog.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		tick := time.NewTicker(startProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-p.exited:
				cancel(errProcessExited)
				return
			case <-tick.C:
				logger.Info("upstream server still starting: no answer to initialize yet", "server", server,
					"waited", time.Since(start).Round(time.Second).String(), "timeout", startTimeoutOf(ctx))
			case <-ctx.Done():
				var st *startTimeoutError
				if errors.As(context.Cause(ctx), &st) {
					p.kill()
					logger.Warn("upstream server timed out while starting; its process tree was killed", "server", server,
						"after", st.after.String(), "first_start", st.first)
				}
				return
			}
		}
	}()
	return ctx, func() { cancel(nil); <-done }
}

// startTimeoutError is the cause of a start that did not complete initialize in time.
type startTimeoutError struct {
	after time.Duration
	first bool // the server's first start in its Pool (FirstStartTimeout)
}

func (e *startTimeoutError) Error() string {
	return fmt.Sprintf("timed out: no answer to initialize within %s", e.after)
}

// startTimeoutOf names the timeout a start is waiting under, for a progress line.
func startTimeoutOf(ctx context.Context) string {
	if d, ok := ctx.Deadline(); ok {
		return "in " + time.Until(d).Round(time.Second).String()
	}
	return "none"
}
