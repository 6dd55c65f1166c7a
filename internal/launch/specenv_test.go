package launch

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// setEnviron puts env (KEY=VALUE entries) in the test's environment, and clears the two
// variables it does not name.
func setEnviron(t *testing.T, env []string) {
	t.Setenv(SpecEnv, "")
	t.Setenv(ArgEnv, "")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// The longest argument travels beside the JSON and comes back in its place; short ones, and
// the interpreter's path, stay in it.
func TestSpecEnviron(t *testing.T) {
	code := strings.Repeat("Yw", longArg)
	s := Spec{Python: "/usr/bin/python3", Argv: []string{"/usr/bin/python3", "-I", "-c", "stub", strings.Repeat("x", longArg), code, "tail"}, Env: []string{"A=1"}}
	env := s.Environ()
	if len(env) != 2 || !strings.HasPrefix(env[0], SpecEnv+"=") || env[1] != ArgEnv+"="+code {
		t.Fatalf("environ: %d entries, %.80q", len(env), env)
	}
	if strings.Contains(env[0], code) {
		t.Fatal("the long argument is in the JSON too")
	}
	if s.Argv[5] != code || s.ArgvFromEnv != 0 {
		t.Fatal("Environ changed its Spec")
	}
	setEnviron(t, env)
	got, err := ReadSpec()
	if err != nil || !slices.Equal(got.Argv, s.Argv) || got.ArgvFromEnv != 0 || !slices.Equal(got.Env, s.Env) {
		t.Fatalf("read back: %v, %.120q", err, got.Argv)
	}

	short := Spec{Argv: []string{strings.Repeat("p", longArg), "-c", "pass"}}
	env = short.Environ()
	if len(env) != 1 {
		t.Fatalf("short arguments: %d entries", len(env))
	}
	setEnviron(t, env)
	if got, err := ReadSpec(); err != nil || !slices.Equal(got.Argv, short.Argv) {
		t.Fatalf("short arguments read back: %v, %q", err, got.Argv)
	}
}

// A Spec that names an argument the environment lacks, or one outside its argv, is refused.
func TestReadSpecRefusesAMissingArgument(t *testing.T) {
	for _, tc := range []struct {
		spec string
		arg  bool
	}{
		{`{"argv":["p","-c",""],"argv_from_env":2}`, false},
		{`{"argv":["p","-c",""],"argv_from_env":3}`, true},
		{`{"argv":["p","-c",""],"argv_from_env":-1}`, true},
	} {
		setEnviron(t, []string{SpecEnv + "=" + tc.spec})
		if !tc.arg {
			os.Unsetenv(ArgEnv) // t.Setenv (setEnviron) restores it
		}
		if _, err := ReadSpec(); err == nil {
			t.Errorf("%s (argument in the environment: %v): read", tc.spec, tc.arg)
		}
	}
}
