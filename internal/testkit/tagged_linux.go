package testkit

import (
	"bytes"
	"os"
	"strconv"
)

// Tagged lists the live processes whose environment holds name=value: a test gives the
// processes it starts such a tag, which their descendants inherit, to find every one of them
// however they left their parent or group. A zombie is dead (it only waits to be reaped) and
// is not listed.
func Tagged(name, value string) []int {
	want := []byte(name + "=" + value + "\x00")
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && bytes.HasPrefix(bytes.TrimSpace(stat[i+1:]), []byte("Z")) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && (bytes.HasPrefix(env, want) || bytes.Contains(env, append([]byte{0}, want...))) {
			out = append(out, pid)
		}
	}
	return out
}
