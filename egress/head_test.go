package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// floodHead writes a request line, then one header of about total bytes in chunks, and the
// head's end, on its own goroutine, stopping when a write fails (the proxy closed); the
// answer is read meanwhile.
func floodHead(w io.Writer, head string, total int) <-chan int {
	sent := make(chan int, 1)
	go func() {
		n, _ := io.WriteString(w, head+"X-Flood: ")
		chunk := []byte(strings.Repeat("a", 64<<10))
		for n < total {
			m, err := w.Write(chunk)
			n += m
			if err != nil {
				sent <- n
				return
			}
		}
		m, _ := io.WriteString(w, "\r\n\r\n")
		sent <- n + m
	}()
	return sent
}

// Issue 38, S4: a 62 MiB header line is answered 431 once the proxy has read at most
// MaxHeadBytes of it, over plain HTTP and inside a tunnel; the bound holds for each request of
// a kept-alive connection anew (a head just under it passes twice), and bodies are not bound
// by it.
func TestProxyBoundsARequestsHead(t *testing.T) {
	o := newPathOrigin(t, false)
	target := fmt.Sprintf("127.0.0.1:%d", o.port)
	p, _, addr := startProxy(t, &Policy{Rules: mustRules(t, target)})
	const flood = 62 << 20

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sent := floodHead(c, "GET http://"+target+"/ HTTP/1.1\r\nHost: "+target+"\r\n", flood)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the answer to a 62 MiB header: %v", err)
	}
	resp.Body.Close()
	c.Close()
	n := <-sent
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 62 MiB header: %d, want 431", resp.StatusCode)
	}
	if read := p.Stats().BytesOut; read > MaxHeadBytes {
		t.Errorf("the proxy read %d bytes of the head before answering, more than %d (the client sent %d)", read, MaxHeadBytes, n)
	}
	t.Logf("plain: 431 after the proxy read %d bytes (the client got %d into the socket)", p.Stats().BytesOut, n)

	// Kept alive: a head just under the bound passes, twice on one connection, and a body
	// larger than the bound is no head.
	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	pad := strings.Repeat("p", MaxHeadBytes-200)
	body := strings.Repeat("b", 2*MaxHeadBytes)
	for i := range 2 {
		if code, _ := exchange(t, c, br, fmt.Sprintf("POST http://%s/%d HTTP/1.1\r\nHost: %s\r\nX-Pad: %s\r\nContent-Length: %d\r\n\r\n%s",
			target, i, target, pad, len(body), body)); code != 200 {
			t.Errorf("request %d of a kept-alive connection, its head just under the bound: %d", i, code)
		}
	}
	if got := len(o.requests()); got != 2 {
		t.Errorf("the origin got %d requests, want 2", got)
	}

	// Inside a tunnel: the same bound on what is read of the TLS stream's plaintext.
	tls := newOrigin(t)
	q, _, qaddr := startProxy(t, &Policy{Rules: mustRules(t, fmt.Sprintf("127.0.0.1:%d", tls.port)), RootCAs: originRoots(tls)})
	tc, tbr := tunnelTo(t, qaddr, fmt.Sprintf("127.0.0.1:%d", tls.port), proxyRoots(t, q))
	sent = floodHead(tc, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n", flood)
	resp, err = http.ReadResponse(tbr, nil)
	if err != nil {
		t.Fatalf("the answer to a 62 MiB header in a tunnel: %v", err)
	}
	resp.Body.Close()
	tc.Close()
	<-sent
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 62 MiB header in a tunnel: %d, want 431", resp.StatusCode)
	}
	// The TLS stream is read a record at a time (at most 16 KiB and its overhead each) beside
	// the plaintext bound, after a handshake of a few KiB.
	if read := q.Stats().BytesOut; read > MaxHeadBytes+2*(16<<10+256)+8<<10 {
		t.Errorf("the proxy read %d bytes of the tunnel before answering", read)
	}
	t.Logf("tunnel: 431 after the proxy read %d bytes of the TLS stream", q.Stats().BytesOut)
	if got := tls.seen(); len(got) != 0 {
		t.Errorf("the origin was sent %d requests", len(got))
	}
}
