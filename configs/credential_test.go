package configs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const secret = "s3cr3t-Value-never-printed"

func TestCredentialResolve(t *testing.T) {
	env := map[string]string{"DOCS_TOKEN": secret, "EMPTY": "", "BAD": "a\r\nInjected: x" + secret}
	files := map[string]string{
		"/run/token":  secret + "\n",
		"/run/empty":  " \n",
		"/run/ctl":    "ab\x00" + secret,
		"/run/huge":   strings.Repeat("x", maxSecretFileBytes+1),
		"/run/spaced": "  " + secret + "  \r\n",
	}
	lookupEnv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	readFile := func(p string) ([]byte, error) {
		if v, ok := files[p]; ok {
			return []byte(v), nil
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	reads := 0
	countingEnv := func(k string) (string, bool) { reads++; return lookupEnv(k) }

	tests := []struct {
		cred    Credential
		want    string
		wantErr string
	}{
		{cred: Credential{Env: "DOCS_TOKEN"}, want: secret},
		{cred: Credential{File: "/run/token"}, want: secret},
		{cred: Credential{File: "/run/spaced"}, want: secret},
		{cred: Credential{Env: "MISSING"}, wantErr: "credential env:MISSING: environment variable MISSING is not set"},
		{cred: Credential{Env: "EMPTY"}, wantErr: "credential env:EMPTY: value is empty"},
		{cred: Credential{Env: "BAD"}, wantErr: "credential env:BAD: value contains a control character"},
		{cred: Credential{File: "/run/missing"}, wantErr: "credential file:/run/missing: open /run/missing: file does not exist"},
		{cred: Credential{File: "/run/empty"}, wantErr: "credential file:/run/empty: value is empty"},
		{cred: Credential{File: "/run/ctl"}, wantErr: "credential file:/run/ctl: value contains a control character"},
		{cred: Credential{File: "/run/huge"}, wantErr: "credential file:/run/huge: file is larger than 65536 bytes"},
		{cred: Credential{}, wantErr: "credential: neither env nor file is set"},
		{cred: Credential{Env: "DOCS_TOKEN", File: "/run/token"}, wantErr: "credential: both env and file are set; set exactly one"},
	}
	for _, tt := range tests {
		got, err := tt.cred.Resolve(countingEnv, readFile)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
			if strings.Contains(gotErr, secret) {
				t.Errorf("%v: error contains the secret: %q", tt.cred, gotErr)
			}
		}
		if got != tt.want || gotErr != tt.wantErr {
			t.Errorf("%v.Resolve() = %q, %q; want %q, %q", tt.cred, got, gotErr, tt.want, tt.wantErr)
		}
	}

	// Fresh per call: a rotated value is seen at once.
	reads = 0
	c := Credential{Env: "DOCS_TOKEN"}
	c.Resolve(countingEnv, readFile)
	env["DOCS_TOKEN"] = "rotated"
	if got, _ := c.Resolve(countingEnv, readFile); got != "rotated" || reads != 2 {
		t.Errorf("after rotation Resolve() = %q after %d reads; want %q after 2", got, reads, "rotated")
	}

	// The caller supplies access; there is no ambient fallback.
	if _, err := (Credential{Env: "X"}).Resolve(nil, nil); err == nil {
		t.Error("Resolve(nil, nil) succeeded; want an error")
	}
	if _, err := (Credential{File: "/x"}).Resolve(nil, nil); err == nil {
		t.Error("Resolve(nil, nil) succeeded; want an error")
	}
}

// A Credential holds a reference, and every way of printing one shows only the reference.
// An Upstream, a Config and a whole loaded file printed any way do not contain the secret.
func TestCredentialNeverPrinted(t *testing.T) {
	t.Setenv("DOCS_TOKEN", secret)
	c, err := Parse(doc(
		"profiles: {default: {}}",
		"upstreams:",
		"  docs: {url: https://docs.example/mcp, bearer: {env: DOCS_TOKEN}}",
		"tenants: {t: {upstreams: [docs], agents: {a: {}}}}",
	), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cred := *c.Upstreams["docs"].Bearer
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("resolving", "bearer", cred, "upstream", c.Upstreams["docs"])
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := cred.MarshalText()
	renderings := map[string]string{
		"String":      cred.String(),
		"MarshalText": string(text),
		"%v":          fmt.Sprintf("%v", cred),
		"%+v":         fmt.Sprintf("%+v", cred),
		"%#v":         fmt.Sprintf("%#v", cred),
		"%v config":   fmt.Sprintf("%+v", *c),
		"json":        string(js),
		"slog":        logged.String(),
	}
	for how, s := range renderings {
		if strings.Contains(s, secret) {
			t.Errorf("%s shows the secret: %s", how, s)
		}
	}
	if diff := cmp.Diff("env:DOCS_TOKEN", renderings["String"]); diff != "" {
		t.Errorf("String() (-want +got):\n%s", diff)
	}
	if !strings.Contains(renderings["slog"], `"bearer":"env:DOCS_TOKEN"`) {
		t.Errorf("slog does not render the reference: %s", renderings["slog"])
	}
	if got := (Credential{File: "/run/secrets/crm"}).String(); got != "file:/run/secrets/crm" {
		t.Errorf("String() = %q", got)
	}
}

// A secret pasted where a reference belongs is refused without being echoed, and so is a
// credential in a URL.
func TestLiteralSecretRefusedQuietly(t *testing.T) {
	for _, line := range []string{
		"  docs: {url: https://docs.example/mcp, bearer: " + secret + "}",
		"  docs: {url: https://docs.example/mcp, bearer: [" + secret + "]}",
		"  docs: {url: \"https://user:" + secret + "@docs.example/mcp\"}",
		"  docs: {url: \"https://docs.example:" + secret + "/mcp\"}",
		"  docs: {command: [x], env: {TOKEN: [" + secret + "]}}",
	} {
		_, err := Parse(doc(
			"profiles: {default: {}}",
			"upstreams:",
			line,
			"tenants: {t: {upstreams: [docs], agents: {a: {}}}}",
		), "t.yaml")
		if err == nil {
			t.Errorf("%s: accepted", line)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error shows the secret: %v", line, err)
		}
		if errors.Unwrap(err) == nil {
			t.Errorf("%s: error carries no Problems", line)
		}
	}
}

func TestHashToken(t *testing.T) {
	// printf %s acme-example-token-1 | sha256sum
	const want = "sha256:0b36bc3241c198bd6e2ca4d0fe4c390a89b31fdde7fc287bd7a4617df307090f"
	if got := HashToken("acme-example-token-1"); got != want {
		t.Errorf("HashToken() = %q, want %q", got, want)
	}
	if !tokenHash().MatchString(want) {
		t.Errorf("HashToken output does not validate")
	}
}
