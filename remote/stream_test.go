package remote

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

func lines(t *testing.T, input string, b Bounds) ([]string, error) {
	t.Helper()
	r := newFrameReader(iotest.OneByteReader(strings.NewReader(input)), b)
	var out []string
	for {
		line, err := r.next()
		if err != nil {
			return out, err
		}
		out = append(out, string(line))
	}
}

func TestFrameReaderBounds(t *testing.T) {
	for _, c := range []struct {
		name, input string
		b           Bounds
		want        []string
		err         string // "" for io.EOF
	}{
		{name: "lines and skipped empty ones", input: "a\n\nbc\n", b: Bounds{}, want: []string{"a", "bc"}},
		{name: "cut mid-line", input: "a\nbc", want: []string{"a"}, err: io.ErrUnexpectedEOF.Error()},
		{name: "a frame at the ceiling", input: "abcd\n", b: Bounds{MaxFrame: 4}, want: []string{"abcd"}},
		{name: "a frame over the ceiling", input: "abcde\n", b: Bounds{MaxFrame: 4}, err: "a frame passed 4 bytes"},
		{name: "an endless line", input: strings.Repeat("x", 100), b: Bounds{MaxFrame: 4}, err: "a frame passed 4 bytes"},
		{name: "the stream ceiling", input: "ab\ncd\nef\n", b: Bounds{MaxStream: 7}, want: []string{"ab", "cd"}, err: "the stream passed 7 bytes"},
		{name: "the line ceiling", input: "a\nb\nc\n", b: Bounds{MaxLines: 2}, want: []string{"a", "b"}, err: "the stream passed 2 lines"},
		{name: "empty lines count as lines", input: "\n\n\na\n", b: Bounds{MaxLines: 3}, err: "the stream passed 3 lines"},
		{name: "the empty-line ceiling", input: "a\n\n\n\nb\n", b: Bounds{MaxEmptyLines: 2}, want: []string{"a"}, err: "the stream passed 2 empty lines"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := lines(t, c.input, c.b)
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("lines %q, want %q", got, c.want)
			}
			switch {
			case c.err == "" && !errors.Is(err, io.EOF):
				t.Errorf("error %v, want EOF", err)
			case c.err != "" && (err == nil || err.Error() != c.err):
				t.Errorf("error %v, want %q", err, c.err)
			}
		})
	}
}

func TestStreamGrammar(t *testing.T) {
	const acc = `{"type":"accepted","execution":"x1"}`
	result := `{"type":"result","execution":"x1","outcome":{"value":1}}`
	for _, c := range []struct {
		name   string
		frames []string
		err    string
	}{
		{name: "the whole grammar", frames: []string{acc, `{"type":"progress","elapsed_seconds":1}`,
			`{"type":"call","id":1,"tool":"a__b","args":{}}`, `{"type":"read","id":2,"handle":"h","offset":0,"limit":5,"pattern":""}`,
			`{"type":"data","stream":"stdout","data":"aGk="}`, `{"type":"data","stream":"artifact:0","data":""}`, result}},
		{name: "an error frame first", frames: []string{`{"type":"error","kind":"backend_unavailable","message":"no"}`}},
		{name: "nothing before accepted", frames: []string{`{"type":"progress","elapsed_seconds":1}`}, err: "outside the running phase"},
		{name: "an error frame later", frames: []string{acc, `{"type":"error","kind":"internal","message":"x"}`}, err: "after the stream was accepted"},
		{name: "a call after data", frames: []string{acc, `{"type":"data","stream":"stdout","data":""}`, `{"type":"call","id":1,"tool":"t","args":{}}`}, err: "outside the running phase"},
		{name: "ids that do not increase", frames: []string{acc, `{"type":"call","id":2,"tool":"t","args":{}}`, `{"type":"call","id":2,"tool":"t","args":{}}`}, err: "does not follow"},
		{name: "data not in its fixed form", frames: []string{acc, `{"type":"data", "stream":"stdout","data":""}`}, err: "fixed form"},
		{name: "data of an unknown stream", frames: []string{acc, `{"type":"data","stream":"artifact:01","data":""}`}, err: "unknown stream"},
		{name: "data that is not base64", frames: []string{acc, `{"type":"data","stream":"stdout","data":"a*=="}`}, err: "base64"},
		{name: "a key in another case", frames: []string{acc, `{"type":"progress","Elapsed_seconds":1}`}, err: "unknown key"},
		{name: "a repeated key", frames: []string{`{"type":"accepted","execution":"x1","execution":"x2"}`}, err: "repeated key"},
		{name: "an unknown type", frames: []string{`{"type":"hello"}`}, err: "unknown frame type"},
		{name: "a frame after the result", frames: []string{acc, result, acc}, err: "followed the end"},
		{name: "an id that cannot sit in a path", frames: []string{`{"type":"accepted","execution":"../x"}`}, err: "no valid execution id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStream(1<<20, 4000, 1<<20)
			var err error
			for _, f := range c.frames {
				if _, err = s.frame([]byte(f)); err != nil {
					break
				}
			}
			switch {
			case c.err == "" && err != nil:
				t.Errorf("error %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Errorf("error %v, want one saying %q", err, c.err)
			}
		})
	}
}

// Output past the ceiling is counted and dropped but for its last preview bytes; an artifact
// is kept whole or not at all.
func TestStreamKeepsWithinCeilings(t *testing.T) {
	s := newStream(4, 2, 5)
	for _, f := range []string{`{"type":"accepted","execution":"x1"}`,
		string(AppendData(nil, "stdout", []byte("abc"))), string(AppendData(nil, "stdout", []byte("def"))),
		string(AppendData(nil, "artifact:0", []byte("123"))), string(AppendData(nil, "artifact:1", []byte("456"))),
		string(AppendData(nil, "artifact:0", []byte("7")))} {
		if _, err := s.frame(bytes.TrimSuffix([]byte(f), []byte("\n"))); err != nil {
			t.Fatal(err)
		}
	}
	if string(s.stdout.Bytes()) != "abcd" || s.stdout.Size() != 6 || !s.stdout.Truncated() || string(s.stdout.Tail()) != "ef" {
		t.Errorf("stdout kept %q of %d, last %q (dropped %v)", s.stdout.Bytes(), s.stdout.Size(), s.stdout.Tail(), s.stdout.Truncated())
	}
	a0, a1 := s.artifacts[0], s.artifacts[1]
	if string(a0.kept) != "1237" || a0.dropped || a1.kept != nil || !a1.dropped || a1.n != 3 {
		t.Errorf("artifacts %+v %+v", a0, a1)
	}
}

// FuzzStream feeds arbitrary bytes to the frame reader and the stream grammar: neither may
// panic, a line is never longer than the frame ceiling, and what is kept stays within its
// ceilings.
func FuzzStream(f *testing.F) {
	f.Add([]byte("{\"type\":\"accepted\",\"execution\":\"x1\"}\n{\"type\":\"data\",\"stream\":\"stdout\",\"data\":\"aGk=\"}\n{\"type\":\"result\",\"execution\":\"x1\",\"result\":{}}\n"))
	f.Add([]byte("{\"type\":\"accepted\",\"execution\":\"x1\"}\n\n\n{\"type\":\"call\",\"id\":1,\"tool\":\"t\",\"args\":{\"a\":[1,2]}}\n"))
	f.Add([]byte("{\"type\":\"error\",\"kind\":\"backend_unavailable\",\"message\":\"m\"}\n"))
	f.Add([]byte("{\"type\":\"data\",\"stream\":\"artifact:7\",\"data\":\"////\"}\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxFrame, maxKept = 256, 64
		r := newFrameReader(bytes.NewReader(data), Bounds{MaxFrame: maxFrame, MaxStream: 4096, MaxLines: 64, MaxEmptyLines: 8})
		s := newStream(maxKept, 16, maxKept)
		for i := 0; i <= len(data); i++ {
			line, err := r.next()
			if err != nil {
				break
			}
			if len(line) > maxFrame || bytes.IndexByte(line, '\n') >= 0 || len(line) == 0 {
				t.Fatalf("a line of %d bytes (ceiling %d), or with a newline, or empty", len(line), maxFrame)
			}
			if _, err := s.frame(line); err != nil {
				break
			}
		}
		if len(s.stdout.Bytes()) > maxKept || len(s.stderr.Bytes()) > maxKept || s.artifactBytes > maxKept || len(s.stdout.Tail()) > 16 {
			t.Fatalf("kept past the ceiling: %d %d %d", len(s.stdout.Bytes()), len(s.stderr.Bytes()), s.artifactBytes)
		}
		if r.total > 4096+1 {
			t.Fatalf("read %d bytes past the stream ceiling", r.total)
		}
	})
}

// What an output stream keeps, its head to the ceiling and its last preview bytes, makes the
// preview of everything that was sent, however the frames cut it.
func TestStreamPreviewIsOfWhatWasSent(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 7))
	for round := range 200 {
		maxOutput, preview := int64(64+rng.IntN(256)), 16+rng.IntN(48)
		sent := make([]byte, rng.IntN(1200))
		for i := range sent {
			sent[i] = "ab\n\xe2\x82\xac\xff"[rng.IntN(7)]
		}
		s := newStream(maxOutput, preview, 0)
		if _, err := s.frame([]byte(`{"type":"accepted","execution":"x1"}`)); err != nil {
			t.Fatal(err)
		}
		for rest := sent; len(rest) > 0; {
			k := min(len(rest), 1+rng.IntN(5000))
			if _, err := s.frame(bytes.TrimSuffix(AppendData(nil, "stdout", rest[:k]), []byte("\n"))); err != nil {
				t.Fatal(err)
			}
			rest = rest[k:]
		}
		sk := s.stdout
		if sk.Size() != int64(len(sent)) || int64(len(sk.Bytes())) != min(maxOutput, int64(len(sent))) || !bytes.Equal(sk.Bytes(), sent[:len(sk.Bytes())]) {
			t.Fatalf("round %d: kept %d of %d (n %d), not the head", round, len(sk.Bytes()), len(sent), sk.Size())
		}
		got := outputs.Preview(sk.Bytes(), sk.Bytes(), int64(len(sk.Bytes())), preview)
		if sk.Truncated() {
			got = outputs.Preview(sk.Bytes(), sk.Tail(), sk.Size(), preview)
		}
		if want := outputs.Preview(sent, sent, int64(len(sent)), preview); got != want {
			t.Fatalf("round %d (%d bytes, ceiling %d, preview %d): preview %q, want %q", round, len(sent), maxOutput, preview, got, want)
		}
	}
}
