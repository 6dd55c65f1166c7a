package configs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// Credential is a reference to a secret, never the secret: {env: NAME} or {file: PATH}, exactly
// one. The secret is read by Resolve, fresh on every call, so a rotated value takes effect at
// the next request; it is never stored here, and neither String, MarshalText, LogValue nor any
// error Resolve returns can contain it.
type Credential struct {
	Env  string `yaml:"env" json:"env,omitempty"`
	File string `yaml:"file" json:"file,omitempty"`
}

// maxSecretFileBytes bounds what Resolve accepts from a file: a bearer token is short, and a
// mistaken path to a large file should fail rather than be sent as a header.
const maxSecretFileBytes = 64 << 10

// Resolve reads the secret now. lookupEnv and readFile are the caller's access to the
// environment and the filesystem (os.LookupEnv and os.ReadFile in cmd); both are required,
// because only cmd touches the process's environment. Surrounding whitespace in a file is
// trimmed. An unset or empty variable, an empty file, or a value with a control character (it
// would break or inject an HTTP header) is an error naming the reference, never the value.
func (c Credential) Resolve(lookupEnv func(string) (string, bool), readFile func(string) ([]byte, error)) (string, error) {
	var secret string
	switch {
	case c.Env != "" && c.File != "":
		return "", errors.New("credential: both env and file are set; set exactly one")
	case c.Env != "":
		if lookupEnv == nil {
			return "", fmt.Errorf("credential %s: no environment lookup given", c)
		}
		v, ok := lookupEnv(c.Env)
		if !ok {
			return "", fmt.Errorf("credential %s: environment variable %s is not set", c, c.Env)
		}
		secret = v
	case c.File != "":
		if readFile == nil {
			return "", fmt.Errorf("credential %s: no file reader given", c)
		}
		b, err := readFile(c.File)
		if err != nil {
			// The reader's error describes the path and the failure, not the content.
			return "", fmt.Errorf("credential %s: %w", c, err)
		}
		if len(b) > maxSecretFileBytes {
			return "", fmt.Errorf("credential %s: file is larger than %d bytes", c, maxSecretFileBytes)
		}
		secret = strings.TrimSpace(string(b))
	default:
		return "", errors.New("credential: neither env nor file is set")
	}
	if secret == "" {
		return "", fmt.Errorf("credential %s: value is empty", c)
	}
	for _, r := range secret {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("credential %s: value contains a control character", c)
		}
	}
	return secret, nil
}

// String names the reference: "env:NAME" or "file:PATH".
func (c Credential) String() string {
	switch {
	case c.Env != "" && c.File != "":
		return "env:" + c.Env + "+file:" + c.File
	case c.Env != "":
		return "env:" + c.Env
	case c.File != "":
		return "file:" + c.File
	}
	return "unset"
}

// MarshalText renders the reference, as String does.
func (c Credential) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// LogValue renders the reference, as String does.
func (c Credential) LogValue() slog.Value { return slog.StringValue(c.String()) }

// HashToken returns the form in which a tenant's bearer token is written in a config:
// "sha256:" + lowercase hex of SHA-256 over the token's bytes. The same as
// `printf %s "$TOKEN" | sha256sum`.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}
