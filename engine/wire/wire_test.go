package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

var (
	childTypes = []string{TypeHello, TypeCall, TypeRead, TypeDone}
	hostTypes  = []string{TypeRun, TypeAbort, TypeResult}
)

type transcriptLine struct {
	from, frame, want string
	line              int
}

func readTranscript(t *testing.T, name string) []transcriptLine {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []transcriptLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		from, rest, ok := strings.Cut(text, ": ")
		if !ok {
			t.Fatalf("%s:%d: want \"child: FRAME\" or \"host: FRAME\"", name, n)
		}
		frame, want, _ := strings.Cut(rest, " => ")
		out = append(out, transcriptLine{from, frame, want, n})
	}
	return out
}

// TestGoldenTranscripts decodes every frame of a valid session with its direction's rules and
// checks that encoding gives the same bytes back.
func TestGoldenTranscripts(t *testing.T) {
	for _, name := range []string{"session.transcript", "refused.transcript", "repr.transcript"} {
		for _, l := range readTranscript(t, name) {
			allowed := childTypes
			if l.from == "host" {
				allowed = hostTypes
			}
			f, err := Decode([]byte(l.frame), allowed...)
			if err != nil {
				t.Errorf("%s:%d: %v", name, l.line, err)
				continue
			}
			var buf bytes.Buffer
			if err := NewWriter(&buf).WriteFrame(f); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSuffix(buf.String(), "\n"); got != l.frame {
				t.Errorf("%s:%d: re-encoded differently:\n got %s\nwant %s", name, l.line, got, l.frame)
			}
		}
	}
}

func TestViolations(t *testing.T) {
	for _, l := range readTranscript(t, "violations.transcript") {
		_, err := Decode([]byte(l.frame), childTypes...)
		var v *Violation
		if !errors.As(err, &v) {
			t.Errorf("line %d: %s: want a violation, got %v", l.line, l.frame, err)
			continue
		}
		if !strings.Contains(v.Error(), l.want) {
			t.Errorf("line %d: violation %q does not say %q", l.line, v.Error(), l.want)
		}
	}
}

func TestReaderBounds(t *testing.T) {
	// A line longer than the ceiling is refused once the ceiling is crossed, before any newline.
	huge := io.MultiReader(strings.NewReader(strings.Repeat("x", 1<<20)), neverEnding{})
	_, err := NewReader(huge, 64<<10).ReadLine()
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("want ErrFrameTooLarge, got %v", err)
	}
	// Lines split across reads of one byte are reassembled.
	r := NewReader(iotest.OneByteReader(strings.NewReader("{\"a\":1}\n{\"b\":2}\npartial")), 0)
	for _, want := range []string{`{"a":1}`, `{"b":2}`} {
		got, err := r.ReadLine()
		if err != nil || string(got) != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	if _, err := r.ReadLine(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a stream ending mid-line: want ErrUnexpectedEOF, got %v", err)
	}
	// A clean end is io.EOF.
	if _, err := NewReader(strings.NewReader(""), 0).ReadLine(); err != io.EOF {
		t.Fatalf("want io.EOF, got %v", err)
	}
}

type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'y'
	}
	return len(p), nil
}

func FuzzDecode(f *testing.F) {
	for _, name := range []string{"session.transcript", "violations.transcript"} {
		data, _ := os.ReadFile(filepath.Join("testdata", name))
		for _, l := range strings.Split(string(data), "\n") {
			if _, frame, ok := strings.Cut(l, ": "); ok {
				f.Add([]byte(strings.Split(frame, " => ")[0]))
			}
		}
	}
	f.Add([]byte(`{"type":"call","id":1,"tool":"x","args":{"s":"\"}{\\","n":[1,{"a":"]"}]}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		// The fast path (decodeFlat) agrees with the general decoder on every line, as
		// TestDecodeFlatAgrees checks on chosen ones (docs/design.md §19.7).
		for _, allowed := range [][]string{childTypes, hostTypes} {
			got, gotErr := Decode(line, allowed...)
			want, wantErr := decodeStrict(line, allowed)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
				t.Fatalf("%q (allowed %v):\n Decode       %#v, %v\n decodeStrict %#v, %v", line, allowed, got, gotErr, want, wantErr)
			}
		}
		fr, err := Decode(line, append(childTypes, hostTypes...)...)
		if err != nil {
			var v *Violation
			if !errors.As(err, &v) {
				t.Fatalf("a decode error that is not a Violation: %v", err)
			}
			return
		}
		// Whatever decodes must encode, and decode again to the same frame.
		var buf bytes.Buffer
		if err := NewWriter(&buf).WriteFrame(fr); err != nil {
			t.Fatalf("encoding a decoded frame: %v", err)
		}
		if _, err := Decode(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), append(childTypes, hostTypes...)...); err != nil {
			t.Fatalf("re-decoding %s: %v", buf.Bytes(), err)
		}
	})
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("{\"type\":\"done\",\"ok\":true}\n"), 16)
	f.Add([]byte("\n\n\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"), 8)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max <= 0 || max > 1<<16 {
			max = 64
		}
		r := NewReader(bytes.NewReader(data), max)
		for i := 0; i < len(data)+1; i++ {
			line, err := r.ReadLine()
			if err != nil {
				return
			}
			if len(line) > max || bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("line of %d bytes past ceiling %d, or with a newline", len(line), max)
			}
		}
		t.Fatalf("the reader returned more lines than there are bytes")
	})
}

// helloLine is a forked child's hello as the bootstrap writes it.
const helloLine = `{"type":"hello","version":1,"probe":{"pid":1,"uid":64511,"gid":64511,"groups":[],` +
	`"canary":"absent","inet_socket":false,"inet6_socket":false,"reached_v4":false,"reached_v6":false,` +
	`"routes":"none","rlimits":{"cpu":[31,32],"as":[-1,-1],"fsize":[67108864,67108864],"nproc":[-1,-1],` +
	`"nofile":[1024,1024]},"env":["HOME","LANG","PATH"],"proc_pids":1,"workspace_writable":true,` +
	`"python":"3.11.2","no_new_privs":1,"seccomp":2,"cap_eff":"0000000000000000","init_signal":"absent",` +
	`"landlock_root":"refused","cgroup_memory":536870912,"cgroup_pids":65}}`

// BenchmarkDecodeHello is BenchmarkDecodeCall for a forked child's hello, a frame with a
// structure (docs/design.md §19.11).
func BenchmarkDecodeHello(b *testing.B) { benchmarkDecodePaths(b, helloLine) }

// BenchmarkDecodeCall decodes a program's binding call as the bootstrap writes it, the frame
// every binding call costs the host, by Decode (its fast path) and by the general path alone
// (docs/design.md §19.7).
func BenchmarkDecodeCall(b *testing.B) {
	benchmarkDecodePaths(b, `{"type": "call", "tool": "mock__add", "args": {"a": 17, "b": 1}, "id": 42}`)
}

// benchmarkDecodePaths decodes a child's frame line by Decode and by decodeStrict alone.
func benchmarkDecodePaths(b *testing.B, frame string) {
	line := []byte(frame)
	for _, path := range []struct {
		name   string
		decode func() (Frame, error)
	}{
		{"Decode", func() (Frame, error) { return Decode(line, childTypes...) }},
		{"decodeStrict", func() (Frame, error) { return decodeStrict(line, childTypes) }},
	} {
		b.Run(path.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := path.decode(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDecodeFlatAgrees decodes every transcript's frame and frames made to trip a scanner
// both ways, Decode (its fast path first) and decodeStrict alone: the same frame or the same
// error each time. The bootstrap's call frame must take the fast path.
func TestDecodeFlatAgrees(t *testing.T) {
	call := `{"type": "call", "tool": "mock__add", "args": {"a": 17, "b": 1}, "id": 42}`
	if decodeFlat([]byte(call), childTypes) == nil {
		t.Errorf("the bootstrap's call frame did not take the fast path: %s", call)
	}
	for _, l := range []string{helloLine, `{"type":"done","ok":false,"error":{"type":"E","message":"m","traceback":"t"}}`} {
		if decodeFlat([]byte(l), childTypes) == nil {
			t.Errorf("a frame with a structure did not take the fast path: %s", l)
		}
	}
	lines := []string{
		call,
		helloLine,
		`{"type":"hello","version":1,"probe":{}}`,
		`{"type":"hello","version":1,"probe":null}`,
		`{"type":"hello","version":1,"probe":"x"}`,
		`{"type":"hello","version":1,"probe":[{"pid":1}]}`,
		`{"type":"hello","version":1,"probe":[]}`,
		`{"type":"hello","version":1,"probe":{"pid":1,"extra":2}}`,
		`{"type":"hello","version":1,"probe":{"pid":1,"pid":2}}`,
		`{"type":"hello","version":1,"probe":{"PID":1}}`,
		`{"type":"hello","version":1,"probe":{"p\u0069d":1}}`,
		`{"type":"hello","version":1,"probe":{"pid":1},"probe":{"uid":2}}`,
		`{"type":"hello","version":1,"probe":{"pid":1,"rlimits":{"cpu":[1,2],"x\"}":[3,4]}}}`,
		`{"type":"hello","version":1,"probe":{"pid":1,"rlimits":{"cpu":{"a":1}}}}`,
		`{"type":"hello","version":1,"probe":{"pid":1,"rlimits":[[1,2]]}}`,
		`{"type":"hello","version":1,"probe":{"pid":1,"groups":[{"a":1}]}}`,
		`{"type":"hello","version":1,"probe":{"pid":1,"env":["a\"b","}"]}}`,
		`{"type":"hello","version":1,"probe":{"pid":1,"env":{"a":1}}}`,
		`{"type":"hello","version":1,"probe":{"pid":1,}}`,
		`{"type":"hello","version":1,"probe":{"pid":1}`,
		`{"type":"hello","version":1,"probe":{"pid":1}}}`,
		`{"type":"hello","version":1,"probe":{"pid":1 "uid":2}}`,
		`{"type":"hello","version":1,"probe":{"pid":1},"extra":{}}`,
		`{"type":"done","ok":false,"error":{"type":"E","message":"m","traceback":"t","Type":"F"}}`,
		`{"type":"done","ok":false,"error":{"type":"E","type":"F"}}`,
		`{"type":"done","ok":false,"error":null}`,
		`{"type":"done","ok":false,"error":{}}`,
		`{"type":"call","id":1,"tool":"x","args":{"s":"\"}{\\","n":[1,{"a":"]"}]}}`,
		`{"type":"call","id":1,"tool":"x","args":"}"}`,
		`{"type":"call","id":1,"tool":"x","args":[]}`,
		` {"type" : "read" , "id":2, "handle":"h", "offset":0, "limit":10} `,
		`{"type":"read","id":2,"handle":"h","offset":0,"limit":10,"pattern":null}`,
		`{"typ\u0065":"call","id":1,"tool":"x","args":{}}`,
		`{"type":"c\u0061ll","id":1,"tool":"x","args":{}}`,
		`{"type":"call","i\u0064":1,"tool":"x","args":{}}`,
		`{"type":"call","id":1,"tool":"x","args":{},"id":2}`,
		`{"type":"call","id":1,"tool":"x","args":{},"type":"done"}`,
		`{"type":"call","ID":1,"tool":"x","args":{}}`,
		`{"type":"call","id":1,"tool":"x","args":{},"extra":0}`,
		`{"type":"call","id":"1","tool":"x","args":{}}`,
		`{"type":"call","id":1,"tool":{"a":1},"args":{}}`,
		`{"type":"call","id":1,"tool":["a"],"args":{}}`,
		`{"type":"call","id":1,"tool":"x","args":{}} x`,
		`{"type":"call","id":1,"tool":"x","args":{}`,
		`{"type":"call","id":1,"tool":"x","args":}`,
		`{"type":"call","id":1,"tool":"x","args":{"a":1}}}`,
		`{"type":"call","id":1 2,"tool":"x","args":{}}`,
		`{"type":"run","program":"x","tools":[],"aliases":[]}`,
		`{"type":"done","ok":true,"value":{"a":[1,2]},"value_type":"dict"}`,
		`{"type":"done","ok":false,"error":{"type":"E","message":"m","traceback":"t"}}`,
		`{"type":"done","ok":true,"value_repr":null}`,
		`{"type":"done","ok":false,"error":{"type":"E","message":"m","traceback":"t","extra":1}}`,
		`{"id":1,"tool":"x","args":{}}`,
		`{}`,
		"{\"type\":\"call\",\"id\":1,\"tool\":\"x\x01\",\"args\":{}}",
		"{\"type\":\"call\",\"id\":1,\"tool\":\"\xff\",\"args\":{}}",
	}
	for _, name := range []string{"session.transcript", "refused.transcript", "repr.transcript", "violations.transcript"} {
		for _, l := range readTranscript(t, name) {
			lines = append(lines, l.frame)
		}
	}
	for _, allowed := range [][]string{childTypes, hostTypes} {
		for _, l := range lines {
			got, gotErr := Decode([]byte(l), allowed...)
			want, wantErr := decodeStrict([]byte(l), allowed)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
				t.Errorf("%s (allowed %v):\n Decode       %#v, %v\n decodeStrict %#v, %v", l, allowed, got, gotErr, want, wantErr)
			}
		}
	}
}
