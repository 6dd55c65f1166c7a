package spawn

import "sort"

// Env is the child's environment, built from nothing: HOME and TMPDIR in the workspace, a
// fixed PATH, no bytecode files, a UTF-8 locale, then the allowlisted variables in name order.
func Env(workspace string, allowed map[string]string) []string {
	env := []string{"HOME=" + workspace, "TMPDIR=" + workspace, "PATH=/usr/local/bin:/usr/bin:/bin",
		"PYTHONDONTWRITEBYTECODE=1", "LC_CTYPE=C.UTF-8"}
	keys := make([]string, 0, len(allowed))
	for k := range allowed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+allowed[k])
	}
	return env
}
