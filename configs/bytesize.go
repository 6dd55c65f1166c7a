package configs

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// ByteSize is a count of bytes. In YAML it is an integer, or a string with a unit: B, KiB,
// MiB, GiB, TiB (powers of 1024) or kB/KB, MB, GB, TB (powers of 1000), with an optional
// space and an optional decimal fraction as long as the result is a whole number of bytes:
// 4000, "512MiB", "1.5 GiB", "10MB". Units are case-sensitive: "mb" could be read as bits.
type ByteSize int64

// The binary units.
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
	TiB ByteSize = 1 << 40
)

var byteUnits = map[string]int64{
	"":    1,
	"B":   1,
	"KiB": 1 << 10,
	"MiB": 1 << 20,
	"GiB": 1 << 30,
	"TiB": 1 << 40,
	"kB":  1e3,
	"KB":  1e3,
	"MB":  1e6,
	"GB":  1e9,
	"TB":  1e12,
}

var (
	errNegativeSize = errors.New("a size cannot be negative")
	errSizeOverflow = errors.New("size is too large (more than 2^63-1 bytes)")
)

// ParseByteSize parses the text form of a ByteSize, as described on the type.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-") {
		return 0, errNegativeSize
	}
	t = strings.TrimPrefix(t, "+")
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	mult, ok := byteUnits[unit]
	if num == "" || !ok || strings.Count(num, ".") > 1 || strings.HasPrefix(num, ".") || strings.HasSuffix(num, ".") {
		return 0, fmt.Errorf("invalid size %q: want an integer or a number with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)", s)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("invalid size %q: not a whole number of bytes", s)
	}
	n := r.Num()
	if !n.IsInt64() {
		return 0, errSizeOverflow
	}
	return ByteSize(n.Int64()), nil
}

// String renders b with the largest binary unit that divides it exactly: "512MiB", "4000B".
func (b ByteSize) String() string {
	for _, u := range []struct {
		name string
		size ByteSize
	}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
		if b != 0 && b%u.size == 0 {
			return strconv.FormatInt(int64(b/u.size), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// Ptr helpers keep literal limits readable in tests and in cmd.

// Bytes returns a pointer to b.
func Bytes(b ByteSize) *ByteSize { return &b }

// Seconds returns a pointer to s.
func Seconds(s float64) *float64 { return &s }

// Count returns a pointer to n.
func Count(n int) *int { return &n }

func finitePositive(f float64) bool { return f > 0 && !math.IsInf(f, 0) && !math.IsNaN(f) }
