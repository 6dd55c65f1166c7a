package userns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Host says where the host's settings are read. The zero value reads the real ones.
type Host struct {
	// ProcSys is the sysctl tree (default /proc/sys).
	ProcSys string
	// AppArmorLabel is the file holding this process's AppArmor label (default
	// /proc/self/attr/apparmor/current, then /proc/self/attr/current).
	AppArmorLabel string
	// SubUID and SubGID are the subordinate id files (default /etc/subuid, /etc/subgid).
	SubUID, SubGID string
	// LookPath finds newuidmap and newgidmap (default exec.LookPath).
	LookPath func(string) (string, error)
}

func (h Host) sysctl(name string) (string, bool) {
	dir := h.ProcSys
	if dir == "" {
		dir = "/proc/sys"
	}
	b, err := readSmall(filepath.Join(dir, strings.ReplaceAll(name, ".", "/")))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// persist is how a sysctl setting outlives a reboot.
func persist(setting string) string {
	return fmt.Sprintf("to keep it across reboots: echo %s | sudo tee /etc/sysctl.d/90-mcp-sandbox.conf", setting)
}

// Blocked returns "" when the settings this host shows let this unprivileged process make a
// user namespace; otherwise the setting that forbids it, and the command that changes it.
// exe is the binary an AppArmor profile would have to name. It reads settings only; a
// trial (making one) is the caller's, who knows what to start.
func (h Host) Blocked(exe string) string {
	if why := h.KernelBlocked(); why != "" {
		return why
	}
	if v, ok := h.sysctl("kernel.apparmor_restrict_unprivileged_userns"); ok && v == "1" && h.unconfined() {
		if exe == "" {
			exe = "/path/to/mcp-sandbox"
		}
		return "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1, as on Ubuntu 23.10 and later) " +
			"and this program has no AppArmor profile that allows them; allow this binary alone with " +
			"`printf 'abi <abi/4.0>,\\ninclude <tunables/global>\\nprofile mcp-sandbox " + exe + " flags=(unconfined) {\\n  userns,\\n}\\n' | " +
			"sudo tee /etc/apparmor.d/mcp-sandbox && sudo apparmor_parser -r /etc/apparmor.d/mcp-sandbox`, " +
			"or lift the restriction for every program with `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (" +
			persist("kernel.apparmor_restrict_unprivileged_userns=0") + "), or run as root"
	}
	return ""
}

// KernelBlocked is Blocked without AppArmor, whose restriction a program with a profile of
// its own (bwrap, on some distributions) escapes: the kernel settings that forbid every
// unprivileged user namespace.
func (h Host) KernelBlocked() string {
	if v, ok := h.sysctl("kernel.unprivileged_userns_clone"); ok && v == "0" {
		return "unprivileged user namespaces are switched off (kernel.unprivileged_userns_clone = 0); switch them on with " +
			"`sudo sysctl -w kernel.unprivileged_userns_clone=1` (" + persist("kernel.unprivileged_userns_clone=1") + "), or run as root"
	}
	if v, ok := h.sysctl("user.max_user_namespaces"); ok && v == "0" {
		return "user namespaces are switched off (user.max_user_namespaces = 0); allow them with " +
			"`sudo sysctl -w user.max_user_namespaces=15000` (" + persist("user.max_user_namespaces=15000") + "), or run as root"
	}
	return ""
}

// unconfined reports whether this process runs without an AppArmor profile of its own (so
// the userns restriction applies to it). An unreadable label counts as unconfined.
func (h Host) unconfined() bool {
	paths := []string{"/proc/self/attr/apparmor/current", "/proc/self/attr/current"}
	if h.AppArmorLabel != "" {
		paths = []string{h.AppArmorLabel}
	}
	for _, p := range paths {
		if b, err := readSmall(p); err == nil && len(b) > 0 {
			label := strings.TrimRight(string(b), "\x00\n")
			return label == "unconfined" || label == ""
		}
	}
	return true
}

// SubIDs is the subordinate uid and gid a sandbox runs as, and the helpers that map them.
type SubIDs struct {
	// UID and GID are host ids from the user's ranges: the last of each, which rootless
	// containers (mapping their uid N to the range's N-th id) practically never use.
	UID, GID             int
	NewUIDMap, NewGIDMap string
	// UIDCount and GIDCount are the sizes of those ranges: UID-UIDCount+1 is the uid
	// range's first id (a template maps a block of them, one per child).
	UIDCount, GIDCount int
}

// Subordinate returns the subordinate ids of the user (by name or uid) and the helpers that
// map them, or nil and why there are none, with the command that would add them.
func (h Host) Subordinate(user string, uid int) (*SubIDs, string) {
	lookPath := h.LookPath
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	subuid, subgid := h.SubUID, h.SubGID
	if subuid == "" {
		subuid = "/etc/subuid"
	}
	if subgid == "" {
		subgid = "/etc/subgid"
	}
	advice := rangeAdvice(nameOr(user, uid), subuid, subgid, lookPath)
	u, nu, err := lastID(subuid, user, uid)
	if err != nil {
		return nil, fmt.Sprintf("%s has no subordinate uid range for %s (%v); %s", subuid, nameOr(user, uid), err, advice)
	}
	g, ng, err := lastID(subgid, user, uid)
	if err != nil {
		return nil, fmt.Sprintf("%s has no subordinate gid range for %s (%v); %s", subgid, nameOr(user, uid), err, advice)
	}
	s := &SubIDs{UID: u, GID: g, UIDCount: nu, GIDCount: ng}
	for _, m := range []struct {
		name string
		into *string
	}{{"newuidmap", &s.NewUIDMap}, {"newgidmap", &s.NewGIDMap}} {
		p, err := lookPath(m.name)
		if err != nil {
			return nil, fmt.Sprintf("%s is not installed, so the subordinate ids in %s cannot be used: `sudo apt-get install uidmap`", m.name, subuid)
		}
		*m.into = p
	}
	return s, ""
}

// Where a new subordinate range goes: useradd's defaults (SUB_UID_MIN, SUB_UID_COUNT), and the
// largest id a range may reach (uid_t's, less the invalid (uid_t)-1).
const (
	rangeMin   = 100000
	rangeCount = 65536
	idMax      = 1<<32 - 2
)

// rangeAdvice is the command that gives user a subordinate range, safe to paste: a range of
// rangeCount ids that no entry of subuid or subgid holds (the first such from rangeMin), and
// uidmap's install only when newuidmap or newgidmap is missing.
func rangeAdvice(user, subuid, subgid string, lookPath func(string) (string, error)) string {
	var advice string
	if start, ok := freeRange(subuid, subgid); ok {
		r := fmt.Sprintf("%d-%d", start, start+rangeCount-1)
		advice = fmt.Sprintf("give the user a range no other user holds with `sudo usermod --add-subuids %s --add-subgids %s %s`", r, r, user)
	} else {
		advice = fmt.Sprintf("give the user a range of %d ids that no entry of %s or %s holds (`sudo usermod --add-subuids FIRST-LAST --add-subgids FIRST-LAST %s`)",
			rangeCount, subuid, subgid, user)
	}
	var missing []string
	for _, m := range []string{"newuidmap", "newgidmap"} {
		if _, err := lookPath(m); err != nil {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		advice += fmt.Sprintf(" and install %s (`sudo apt-get install uidmap`)", strings.Join(missing, " and "))
	}
	return advice
}

// freeRange returns the first start from rangeMin of rangeCount ids that overlap no range in
// any of files (a file that cannot be read holds none), or false when none fits.
func freeRange(files ...string) (int64, bool) {
	var taken [][2]int64 // [first, last]
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
		for sc.Scan() {
			fields := strings.Split(strings.TrimSpace(sc.Text()), ":")
			if len(fields) != 3 {
				continue
			}
			first, err1 := strconv.ParseInt(fields[1], 10, 64)
			count, err2 := strconv.ParseInt(fields[2], 10, 64)
			if err1 == nil && err2 == nil && count > 0 {
				taken = append(taken, [2]int64{first, first + count - 1})
			}
		}
		f.Close()
	}
	start := int64(rangeMin)
	for moved := true; moved; {
		moved = false
		for _, r := range taken {
			if start <= r[1] && r[0] <= start+rangeCount-1 {
				start, moved = r[1]+1, true
			}
		}
	}
	return start, start+rangeCount-1 <= idMax
}

func nameOr(user string, uid int) string {
	if user != "" {
		return user
	}
	return strconv.Itoa(uid)
}

// lastID returns the last id of the first range of file that belongs to user (by name or by
// uid, as newuidmap accepts either), and that range's size.
func lastID(file, user string, uid int) (int, int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		fields := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(fields) != 3 || (fields[0] != user && fields[0] != strconv.Itoa(uid)) {
			continue
		}
		start, err1 := strconv.Atoi(fields[1])
		count, err2 := strconv.Atoi(fields[2])
		if err1 != nil || err2 != nil || start <= 0 || count <= 0 {
			continue
		}
		return start + count - 1, count, nil
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	return 0, 0, errors.New("no entry")
}

// Map writes the uid and gid maps of the user namespace pid lives in: inside 0 is the owner
// (the host's own uid and gid, which made the namespace), and insideUID/insideGID are the
// subordinate ids. It runs newuidmap and newgidmap and fails with their message.
func (s *SubIDs) Map(ctx context.Context, pid, ownerUID, ownerGID, insideUID, insideGID int) error {
	return s.MapRanges(ctx, pid, []Range{{0, ownerUID, 1}, {insideUID, s.UID, 1}}, []Range{{0, ownerGID, 1}, {insideGID, s.GID, 1}})
}

// Range is one line of a uid or gid map: Count ids from Inside map to as many from Outside.
type Range struct{ Inside, Outside, Count int }

// MapRanges writes the uid and gid maps of the user namespace pid lives in, line by line
// (newuidmap and newgidmap accept only the owner's own id and ids of its ranges outside).
func (s *SubIDs) MapRanges(ctx context.Context, pid int, uids, gids []Range) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, m := range []struct {
		bin    string
		ranges []Range
	}{{s.NewUIDMap, uids}, {s.NewGIDMap, gids}} {
		args := []string{strconv.Itoa(pid)}
		for _, r := range m.ranges {
			args = append(args, strconv.Itoa(r.Inside), strconv.Itoa(r.Outside), strconv.Itoa(r.Count))
		}
		cmd := exec.CommandContext(ctx, m.bin, args...)
		out := &capped{max: 1024}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s %s: %v: %s", filepath.Base(m.bin), strings.Join(args, " "), err, strings.TrimSpace(string(out.b)))
		}
	}
	return nil
}

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 4096))
}

// capped keeps the first max bytes written to it and discards the rest.
type capped struct {
	b   []byte
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
