package inithelper

import (
	"embed"
	"io/fs"
	"strings"
	"sync"
)

// embedded holds init and init.sha256 when ./overlay's overlay made the build; else only a
// README.
//
//go:embed embedded
var embedded embed.FS

// Helper is the init helper the backends exec.
type Helper struct {
	// Path is the helper's file; "" when this binary is its own helper (the backends'
	// default, os.Executable).
	Path string `json:"path,omitempty"`
	// Embedded: Path is the embedded helper; Size its bytes.
	Embedded bool  `json:"embedded"`
	Size     int64 `json:"size,omitempty"`
	// Why says why this binary is its own helper, when it is.
	Why string `json:"why,omitempty"`
}

var (
	once     sync.Once
	resolved Helper
)

// Resolve returns the helper, writing the embedded one to its file at the first call.
func Resolve() Helper {
	once.Do(func() { resolved = resolve(embedded) })
	return resolved
}

// embeddedHelper is the helper in fsys and its SHA-256 in hex, or why there is none.
func embeddedHelper(fsys fs.FS) (size int64, sum string, why string) {
	info, err := fs.Stat(fsys, "embedded/init")
	if err != nil {
		return 0, "", "this build embeds none: it was not built by make build or make dist"
	}
	b, err := fs.ReadFile(fsys, "embedded/init.sha256")
	sum = strings.TrimSpace(string(b))
	if err != nil || len(sum) != 64 {
		return 0, "", "this build's embedded init helper has no digest (embedded/init.sha256)"
	}
	return info.Size(), sum, ""
}
