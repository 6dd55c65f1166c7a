//go:build linux

package container

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/tokenconn"
)

func record(stream byte, payload string) string {
	h := make([]byte, recordHeader)
	h[0] = stream
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	return string(h) + payload
}

// demuxAll feeds input to a fresh channel in pieces of size step (from one goroutine, as the
// CLI's copy does), then ends it as a reaped CLI would, and returns what the channel read,
// the error that ended the reads, and the program's stdout.
func demuxAll(t *testing.T, token, input string, step int) (channelBytes, stdout string, err error) {
	t.Helper()
	var out bytes.Buffer
	s := newStreams(token, &out)
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		w := s.demux()
		for b := []byte(input); len(b) > 0; {
			n := min(step, len(b))
			if _, err := w.Write(b[:n]); err != nil {
				t.Errorf("demux Write: %v", err)
			}
			b = b[n:]
		}
		s.fail(errNoChild)
	}()
	got, err := io.ReadAll(s)
	<-fed
	return string(got), out.String(), err
}

// The token line, then stdout and channel records interleaved, arrive split at every size:
// the channel reads exactly the frames, stdout gets exactly the program's bytes, and the end
// of the CLI's stdout is the end of the channel.
func TestStreamsDemux(t *testing.T) {
	token := tokenconn.NewToken()
	frames := `{"type":"hello","version":1,"probe":{}}` + "\n" + `{"type":"done","ok":true,"value":1}` + "\n"
	big := strings.Repeat("x", maxRecord)
	input := token + "\n" + record(stdoutRecord, "before ") + record(channelRecord, frames[:10]) +
		record(stdoutRecord, big) + record(channelRecord, frames[10:]) + record(stdoutRecord, "after")
	for _, step := range []int{1, 3, recordHeader, 1000, len(input)} {
		ch, stdout, err := demuxAll(t, token, input, step)
		if ch != frames || err != nil || stdout != "before "+big+"after" {
			t.Errorf("step %d: channel %q, err %v, stdout %d bytes", step, ch, err, len(stdout))
		}
	}
}

// Whatever breaks the framing ends the channel with a protocol violation, never a clean
// end; nothing after it reaches the channel or stdout.
func TestStreamsMalformed(t *testing.T) {
	token := tokenconn.NewToken()
	header := func(b ...byte) string { return string(b) }
	for name, input := range map[string]string{
		"a wrong token":           strings.Repeat("0", len(token)) + "\n" + record(channelRecord, "{}\n"),
		"a line longer than it":   token + "0\n",
		"a frame before it":       `{"type":"hello","version":1,"probe":{}}` + "\n",
		"an unknown stream":       token + "\n" + record(2, "x"),
		"a reserved byte set":     token + "\n" + header(channelRecord, 0, 1, 0, 0, 0, 0, 1) + "x",
		"a record over the bound": token + "\n" + header(channelRecord, 0, 0, 0, 0, 1, 0, 1),
		"an empty stdout record":  token + "\n" + record(stdoutRecord, ""),
	} {
		ch, stdout, err := demuxAll(t, token, input+record(stdoutRecord, "late"), 7)
		if !errors.Is(err, errMalformedStreams) || ch != "" || stdout != "" {
			t.Errorf("%s: channel %q, err %v, stdout %q; want errMalformedStreams and nothing", name, ch, err, stdout)
		}
	}
}

// The child's empty channel record (it closed its channel) ends the frames while its stdout
// goes on; a CLI that ends before the token is the child's exit before it connected.
func TestStreamsEnds(t *testing.T) {
	token := tokenconn.NewToken()
	ch, stdout, err := demuxAll(t, token, token+"\n"+record(channelRecord, "{}\n")+record(channelRecord, "")+
		record(channelRecord, "ignored\n")+record(stdoutRecord, "still printing"), 5)
	if ch != "{}\n" || err != nil || stdout != "still printing" {
		t.Errorf("after the child's end: channel %q, err %v, stdout %q", ch, err, stdout)
	}
	ch, _, err = demuxAll(t, token, token[:10], 5)
	if ch != "" || !errors.Is(err, errNoChild) || !errors.Is(err, io.EOF) {
		t.Errorf("the CLI ended before the token: channel %q, err %v; want errNoChild", ch, err)
	}
}

// Close ends the reads (net.ErrClosed, as a closed socket's) and the demux goes on consuming
// what the CLI copies without blocking on a reader that is gone.
func TestStreamsClose(t *testing.T) {
	token := tokenconn.NewToken()
	var out bytes.Buffer
	s := newStreams(token, &out)
	s.Close()
	s.Close()
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close: %v, want net.ErrClosed", err)
	}
	input := token + "\n" + record(channelRecord, strings.Repeat("f", maxRecord)) + record(stdoutRecord, "out")
	if n, err := s.demux().Write([]byte(input)); n != len(input) || err != nil {
		t.Errorf("demux Write after Close: %d, %v; want all of %d consumed", n, err, len(input))
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v, want net.ErrClosed", err)
	}
}

func FuzzStreamsDemux(f *testing.F) {
	token := strings.Repeat("ab", len(tokenconn.NewToken())/2) // a token's length, fixed for the corpus
	f.Add([]byte(token + "\n" + record(channelRecord, "{}\n") + record(stdoutRecord, "x")))
	f.Add([]byte(token + "\n" + record(channelRecord, "")))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, input []byte) {
		var out bytes.Buffer
		s := newStreams(token, &out)
		go func() {
			_, _ = s.demux().Write(input)
			s.fail(errNoChild)
		}()
		got, _ := io.ReadAll(s)
		if len(got)+out.Len() > len(input) {
			t.Fatalf("the demux delivered %d bytes from %d", len(got)+out.Len(), len(input))
		}
	})
}
