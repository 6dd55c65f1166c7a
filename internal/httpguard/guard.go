package httpguard

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits bound what one client can hold of an HTTP listener: connections, overall and per
// remote address, and how long a request may take to arrive, a response write to leave, and a
// keep-alive connection to sit idle. None of them cuts a long-running streamed response (a
// run_code, an execution's frame stream): the request body has Timeout to arrive, then the
// connection waits on the handler for as long as it runs, and each write of the stream has
// Timeout of its own.
type Limits struct {
	// Timeout bounds a request's arrival, each write of its response and a keep-alive
	// connection's idling; 0 leaves the writes to the handler (which bounds each itself) and
	// idling to DefaultTimeout.
	Timeout        time.Duration
	MaxConns       int // 0: no global cap
	MaxConnsPerIP  int // 0: no per-address cap
	refusalTimeout time.Duration
}

// The defaults of the commands' flags, and the bounds every guarded server has.
const (
	DefaultTimeout       = 60 * time.Second
	DefaultMaxConns      = 1024
	DefaultMaxConnsPerIP = 256
	// HeaderTimeout bounds the arrival of a request's headers.
	HeaderTimeout = 10 * time.Second
	// maxRefusing bounds the refusals being written at once; past it a connection over a cap
	// is closed without one.
	maxRefusing = 64
)

// Server returns the http.Server for handler under l.
func (l Limits) Server(handler http.Handler) *http.Server {
	if l.Timeout <= 0 {
		return &http.Server{Handler: handler, ReadHeaderTimeout: HeaderTimeout, IdleTimeout: DefaultTimeout}
	}
	return &http.Server{
		Handler:           deadlines(handler, l.Timeout),
		ReadHeaderTimeout: min(HeaderTimeout, l.Timeout),
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

// PreAuthTimeout is how long a connection may stay open without carrying an authenticated
// request: long enough for any client to send its first request, short enough that
// connections opened and left idle by someone without a token free their slots in seconds.
const PreAuthTimeout = 5 * time.Second

// AuthReserve is the part of MaxConns (one in AuthReserve) that connections which have not
// yet carried an authenticated request never hold: at least that many are there for
// authenticated clients whatever the unauthenticated ones do.
const AuthReserve = 4

// Listener refuses a connection past MaxConnsPerIP open ones from one remote address, or
// past MaxConns open ones when every one of them has carried an authenticated request, with a
// 503 that says which cap and why, and closes it. Connections that have not yet carried an
// authenticated request (Gate promotes the others) are "unauthenticated": they may hold
// at most MaxConns minus a reserve (AuthReserve), they are closed PreAuthTimeout after they
// were accepted, and when a new connection finds no free slot for it, the oldest of them is
// closed to make room: idle connections of someone without a token cannot shut out a client
// with one. Close waits for the refusals being written (each bounded by refusalTimeout).
type Listener struct {
	net.Listener
	limits    Limits
	preAuth   time.Duration
	unauthCap int // 0: no cap

	mu      sync.Mutex
	total   int
	perIP   map[string]int
	unauth  list.List // of *cappedConn, oldest first: the unauthenticated connections
	refuse  sync.WaitGroup
	pending int
}

// NewListener guards inner under l's caps.
func NewListener(inner net.Listener, l Limits) *Listener {
	if l.refusalTimeout <= 0 {
		l.refusalTimeout = time.Second
	}
	cl := &Listener{Listener: inner, limits: l, perIP: map[string]int{}, preAuth: PreAuthTimeout}
	if l.MaxConns > 0 {
		cl.unauthCap = max(1, l.MaxConns-l.MaxConns/AuthReserve)
	}
	return cl
}

func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		var why string
		var evict *cappedConn
		switch {
		case l.limits.MaxConnsPerIP > 0 && l.perIP[ip] >= l.limits.MaxConnsPerIP:
			why = fmt.Sprintf("%s holds its limit of %d connections to this server", ip, l.limits.MaxConnsPerIP)
		case l.limits.MaxConns > 0 && l.total >= l.limits.MaxConns && l.unauth.Len() == 0:
			why = fmt.Sprintf("the server holds its limit of %d connections", l.limits.MaxConns)
		case l.limits.MaxConns > 0 && (l.total >= l.limits.MaxConns || l.unauth.Len() >= l.unauthCap):
			// No slot for one more unauthenticated connection: the oldest makes room.
			evict = l.unauth.Front().Value.(*cappedConn)
			evict.once.Do(func() { l.releaseLocked(evict) })
		}
		if why == "" {
			cc := &cappedConn{Conn: c, l: l, ip: ip}
			l.total++
			l.perIP[ip]++
			cc.elem = l.unauth.PushBack(cc)
			cc.timer = time.AfterFunc(l.preAuth, cc.preAuthExpired)
			l.mu.Unlock()
			if evict != nil {
				_ = evict.Conn.Close()
			}
			return cc, nil
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
func (l *Listener) refuseConn(c net.Conn, why string) {
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

// releaseLocked gives c's slot back. Called with mu held, once per connection (c.once).
func (l *Listener) releaseLocked(c *cappedConn) {
	l.total--
	if l.perIP[c.ip]--; l.perIP[c.ip] <= 0 {
		delete(l.perIP, c.ip)
	}
	if c.elem != nil {
		l.unauth.Remove(c.elem)
		c.elem = nil
	}
	c.timer.Stop()
}

// Close closes the listener and waits for the refusals in flight.
func (l *Listener) Close() error {
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

// cappedConn gives its slot back when closed, once; until it has carried an authenticated
// request it is among its listener's unauthenticated connections.
type cappedConn struct {
	net.Conn
	l     *Listener
	ip    string
	once  sync.Once
	timer *time.Timer
	elem  *list.Element // in l.unauth while unauthenticated; guarded by l.mu
}

func (c *cappedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.releaseLocked(c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// authenticated takes c out of the unauthenticated connections for good.
func (c *cappedConn) authenticated() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.elem != nil {
		c.l.unauth.Remove(c.elem)
		c.elem = nil
		c.timer.Stop()
	}
}

// preAuthExpired closes c if it has not carried an authenticated request by now.
func (c *cappedConn) preAuthExpired() {
	c.l.mu.Lock()
	unauth := c.elem != nil
	c.l.mu.Unlock()
	if unauth {
		_ = c.Close()
	}
}

type connKey struct{}

// Gate makes srv's connections answer to authed, which says whether a request carries a
// credential the handler accepts (or needs none): the handler's own decision, never a copy of
// it. A connection that carries one leaves the unauthenticated connections of its Listener;
// any other request (a 401, a 404, and the public /healthz and /readyz alike) is answered
// with "Connection: close", so an answer without a credential never leaves a connection open
// to hold a slot.
func Gate(srv *http.Server, authed func(*http.Request) bool) {
	next := srv.Handler
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if authed(r) {
			if cc, ok := r.Context().Value(connKey{}).(*cappedConn); ok {
				cc.authenticated()
			}
		} else {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}
