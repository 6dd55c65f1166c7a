package launch

import (
	"encoding/json"
	"fmt"
	"os"
)

// ArgEnv carries, beside SpecEnv, the one long element of Spec.Argv (the bootstrap's
// compiled code, about 90 KB of base64) that Spec.ArgvFromEnv names: as a JSON string it cost
// the host about 0.4 ms to encode and the helper 1 ms to decode at every start, and it made
// SpecEnv three quarters of the kernel's bound on one environment string (MAX_ARG_STRLEN,
// 128 KiB). Like SpecEnv it never reaches the interpreter (docs/design.md §19.10).
const ArgEnv = "MCP_SANDBOX_INIT_ARG"

// longArg is the length from which an element of Spec.Argv travels in ArgEnv.
const longArg = 4 << 10

// Environ is the helper's whole environment for s: the Spec as JSON in SpecEnv, and its
// longest argv element of at least longArg bytes, if any, in ArgEnv instead of the JSON.
func (s Spec) Environ() []string {
	long := 0 // Argv[0], the interpreter's path, never travels apart
	for i, a := range s.Argv {
		if i > 0 && len(a) >= longArg && len(a) > len(s.Argv[long]) {
			long = i
		}
	}
	if long == 0 {
		js, _ := json.Marshal(&s)
		return []string{SpecEnv + "=" + string(js)}
	}
	arg := s.Argv[long]
	s.Argv = append([]string(nil), s.Argv...)
	s.Argv[long], s.ArgvFromEnv = "", long
	js, _ := json.Marshal(&s)
	return []string{SpecEnv + "=" + string(js), ArgEnv + "=" + arg}
}

// ReadSpec reads the Spec Environ put in this process's environment.
func ReadSpec() (Spec, error) {
	var s Spec
	if err := json.Unmarshal([]byte(os.Getenv(SpecEnv)), &s); err != nil {
		return Spec{}, err
	}
	if s.ArgvFromEnv != 0 {
		arg, ok := os.LookupEnv(ArgEnv)
		if s.ArgvFromEnv < 0 || s.ArgvFromEnv >= len(s.Argv) || !ok {
			return Spec{}, fmt.Errorf("argument %d is not in %s", s.ArgvFromEnv, ArgEnv)
		}
		s.Argv[s.ArgvFromEnv], s.ArgvFromEnv = arg, 0
	}
	return s, nil
}
