package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// httpLimits bound what one client can hold of the HTTP listener: connections, overall and per
// remote address, and how long a request may take to arrive, a response write to leave, and a
// keep-alive connection to sit idle. None of them cuts a long-running streamed run_code: the
// request body has Timeout to arrive, then the connection waits on the handler for as long as
// the program runs, and each write of the stream has Timeout of its own.
type httpLimits struct {
	Timeout        time.Duration
	MaxConns       int // 0: no global cap
	MaxConnsPerIP  int // 0: no per-address cap
	refusalTimeout time.Duration
}

const (
	defaultHTTPTimeout       = 60 * time.Second
	defaultMaxConns          = 1024
	defaultMaxConnsPerIP     = 256
	defaultHTTPHeaderTimeout = 10 * time.Second
	// maxRefusing bounds the refusals being written at once; past it a connection over a cap
	// is closed without one.
	maxRefusing = 64
)

// server returns the http.Server for handler under l.
func (l httpLimits) server(handler http.Handler) *http.Server {
	return &http.Server{
		Handler:           deadlines(handler, l.Timeout),
		ReadHeaderTimeout: min(defaultHTTPHeaderTimeout, l.Timeout),
		// ReadTimeout bounds the whole request (a slow body); deadlines lifts it once the
		// body has arrived, so a long response is not cancelled by it.
		ReadTimeout:  l.Timeout,
		WriteTimeout: l.Timeout,
		IdleTimeout:  l.Timeout,
	}
}

// deadlines lifts the server's read deadline once a request's body has been read (a streamed
// response must not be cancelled when the whole-request deadline passes), and gives every
// write of the response timeout of its own, so a response streaming for longer than timeout
// is not cut while a client that stops reading is.
func deadlines(next http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Body == nil || r.Body == http.NoBody {
			_ = rc.SetReadDeadline(time.Time{})
		} else {
			r.Body = &bodyEOF{ReadCloser: r.Body, done: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		}
		sw := &streamWriter{ResponseWriter: w, rc: rc, timeout: timeout}
		next.ServeHTTP(sw, r)
		// What the server writes after the handler (the end of a chunked stream) gets its
		// own time too, however long the handler was quiet before returning.
		sw.extend()
	})
}

// bodyEOF calls done once, when the body has been read to its end.
type bodyEOF struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *bodyEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.done)
	}
	return n, err
}

// streamWriter sets a fresh write deadline before every write and flush.
type streamWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (s *streamWriter) extend() { _ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout)) }

func (s *streamWriter) Write(p []byte) (int, error) {
	s.extend()
	return s.ResponseWriter.Write(p)
}

func (s *streamWriter) WriteHeader(code int) {
	s.extend()
	s.ResponseWriter.WriteHeader(code)
}

func (s *streamWriter) Flush() {
	s.extend()
	_ = s.rc.Flush()
}

func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// capListener refuses a connection past MaxConns open ones, or past MaxConnsPerIP from one
// remote address, with a 503 that says which cap and why, and closes it. Close waits for
// the refusals being written (each bounded by refusalTimeout).
type capListener struct {
	net.Listener
	limits httpLimits

	mu      sync.Mutex
	total   int
	perIP   map[string]int
	refuse  sync.WaitGroup
	pending int
}

func newCapListener(inner net.Listener, l httpLimits) *capListener {
	if l.refusalTimeout <= 0 {
		l.refusalTimeout = time.Second
	}
	return &capListener{Listener: inner, limits: l, perIP: map[string]int{}}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		var why string
		switch {
		case l.limits.MaxConns > 0 && l.total >= l.limits.MaxConns:
			why = fmt.Sprintf("the server holds its limit of %d connections", l.limits.MaxConns)
		case l.limits.MaxConnsPerIP > 0 && l.perIP[ip] >= l.limits.MaxConnsPerIP:
			why = fmt.Sprintf("%s holds its limit of %d connections to this server", ip, l.limits.MaxConnsPerIP)
		}
		if why == "" {
			l.total++
			l.perIP[ip]++
			l.mu.Unlock()
			return &cappedConn{Conn: c, release: func() { l.release(ip) }}, nil
		}
		refusing := l.pending < maxRefusing
		if refusing {
			l.pending++
			l.refuse.Add(1)
		}
		l.mu.Unlock()
		slog.Warn("http connection refused", "remote", ip, "reason", why)
		if !refusing {
			c.Close()
			continue
		}
		go l.refuseConn(c, why)
	}
}

// refuseConn answers 503 without reading the request, then drains what the client sent
// (briefly) so closing does not reset the connection before the client reads the answer.
func (l *capListener) refuseConn(c net.Conn, why string) {
	defer func() {
		l.mu.Lock()
		l.pending--
		l.mu.Unlock()
		l.refuse.Done()
	}()
	defer c.Close()
	body := "mcp-sandbox: connection refused: " + why + "; close idle connections or retry later\n"
	_ = c.SetDeadline(time.Now().Add(l.limits.refusalTimeout))
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s", len(body), body)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

func (l *capListener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
}

// Close closes the listener and waits for the refusals in flight.
func (l *capListener) Close() error {
	err := l.Listener.Close()
	l.refuse.Wait()
	return err
}

func remoteIP(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// cappedConn gives its slot back when closed, once.
type cappedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *cappedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
