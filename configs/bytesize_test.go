package configs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in      string
		want    ByteSize
		wantErr string
	}{
		{in: "0", want: 0},
		{in: "4000", want: 4000},
		{in: "4000B", want: 4000},
		{in: "1KiB", want: 1024},
		{in: "256KiB", want: 256 << 10},
		{in: "512MiB", want: 512 << 20},
		{in: "512 MiB", want: 512 << 20},
		{in: " 2GiB ", want: 2 << 30},
		{in: "1TiB", want: 1 << 40},
		{in: "1.5GiB", want: 3 << 29},
		{in: "0.5KiB", want: 512},
		{in: "10kB", want: 10_000},
		{in: "10KB", want: 10_000},
		{in: "10MB", want: 10_000_000},
		{in: "3GB", want: 3_000_000_000},
		{in: "2TB", want: 2_000_000_000_000},
		{in: "8388607TiB", want: 8388607 << 40},
		{in: "9223372036854775807", want: 1<<63 - 1},
		{in: "9223372036854775808", wantErr: "size is too large (more than 2^63-1 bytes)"},
		{in: "8388608TiB", wantErr: "size is too large (more than 2^63-1 bytes)"},
		{in: "-1", wantErr: "a size cannot be negative"},
		{in: "-1MiB", wantErr: "a size cannot be negative"},
		{in: "1.5B", wantErr: `invalid size "1.5B": not a whole number of bytes`},
		{in: "1mib", wantErr: `invalid size "1mib": want an integer or a number with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)`},
		{in: "MiB", wantErr: `invalid size "MiB": want an integer or a number with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)`},
		{in: "", wantErr: `invalid size "": want an integer or a number with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)`},
		{in: "1..5MiB", wantErr: `invalid size "1..5MiB": want an integer or a number with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)`},
		{in: ".5MiB", wantErr: `invalid size ".5MiB": want an integer or a number with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)`},
		{in: "1e6", wantErr: `invalid size "1e6": want an integer or a number with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)`},
	}
	for _, tt := range tests {
		got, err := ParseByteSize(tt.in)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if got != tt.want || gotErr != tt.wantErr {
			t.Errorf("ParseByteSize(%q) = %d, %q; want %d, %q", tt.in, got, gotErr, tt.want, tt.wantErr)
		}
	}
}

func TestByteSizeString(t *testing.T) {
	for b, want := range map[ByteSize]string{
		0:               "0B",
		4000:            "4000B",
		1024:            "1KiB",
		256 * KiB:       "256KiB",
		512 * MiB:       "512MiB",
		1536 * MiB:      "1536MiB",
		3 * GiB:         "3GiB",
		2 * TiB:         "2TiB",
		1<<63 - 1:       "9223372036854775807B",
		10 * MiB / 1000: "10485B",
	} {
		if got := b.String(); got != want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(b), got, want)
		}
		if want != "10485B" {
			back, err := ParseByteSize(want)
			if err != nil || back != b {
				t.Errorf("ParseByteSize(%q) = %d, %v; want %d", want, back, err, int64(b))
			}
		}
	}
}

// Sizes in YAML: an integer or a string; anything else, or out of range, names key and line.
func TestByteSizeYAML(t *testing.T) {
	tests := []struct {
		value string
		want  ByteSize
		err   string
	}{
		{value: "4096", want: 4096},
		{value: "0x1000", want: 4096},
		{value: "1_048_576", want: MiB},
		{value: "8MiB", want: 8 * MiB},
		{value: `"8 MiB"`, want: 8 * MiB},
		{value: "10MB", want: 10_000_000},
		{value: "-5", err: "t.yaml:3: profiles.default.output.max_bytes: a size cannot be negative"},
		{value: "-5MiB", err: "t.yaml:3: profiles.default.output.max_bytes: a size cannot be negative"},
		{value: "18446744073709551615", err: "t.yaml:3: profiles.default.output.max_bytes: size is too large (more than 2^63-1 bytes)"},
		{value: "99999999999999999999999", err: "t.yaml:3: profiles.default.output.max_bytes: size is too large (more than 2^63-1 bytes)"},
		{value: "1e6", err: `t.yaml:3: profiles.default.output.max_bytes: invalid size "1e6": want an integer or a number with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)`},
		{value: "8 megs", err: `t.yaml:3: profiles.default.output.max_bytes: invalid size "8 megs": want an integer or a number with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)`},
		{value: "true", err: `t.yaml:3: profiles.default.output.max_bytes: expected a byte size (an integer, or a string like "512MiB"), got a boolean`},
		{value: "[1]", err: `t.yaml:3: profiles.default.output.max_bytes: expected a byte size (an integer, or a string like "512MiB"), got a sequence`},
	}
	for _, tt := range tests {
		c, err := Parse(doc(
			"profiles:",
			"  default:",
			"    output: {preview_bytes: 10, max_bytes: "+tt.value+"}",
			"tenants: {t: {agents: {a: {}}}}",
		), "t.yaml")
		if tt.err != "" {
			if diff := cmp.Diff([]string{tt.err}, problemsOf(t, err)); diff != "" {
				t.Errorf("max_bytes: %s: problems (-want +got):\n%s", tt.value, diff)
			}
			continue
		}
		if err != nil {
			t.Errorf("max_bytes: %s: %v", tt.value, err)
			continue
		}
		if got := *c.Profiles["default"].Output.MaxBytes; got != tt.want {
			t.Errorf("max_bytes: %s = %d, want %d", tt.value, got, tt.want)
		}
	}
}
