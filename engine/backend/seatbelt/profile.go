package seatbelt

import (
	"path"
	"slices"
	"strings"
)

// Policy is what one child's profile is generated from: the paths it may read, the two it may
// also write, and whether it may use the network. Every path is absolute and already resolved
// (Seatbelt matches the path the kernel resolved: /private/var/folders/…, not /var/folders/…).
type Policy struct {
	// Python is the interpreter sandbox-exec starts; it and every ReadOnly path may be
	// executed too (a program may start a subprocess of the same interpreter).
	Python string
	// ReadOnly are the interpreter's directories, the system's libraries and frameworks, and
	// any other path the terms open for reading.
	ReadOnly []string
	// Workspace is the execution's workspace; Temp its temporary directory (the child's
	// TMPDIR). Nothing else is writable.
	Workspace, Temp string
	// Network grants the network (the terms' network: unrestricted).
	Network bool
}

// systemReadOnly are the paths every interpreter on macOS reads besides its own directories:
// the dyld shared cache and system frameworks, the libraries under /usr, the time zone and the
// few files of /private/etc a libc lookup opens. None is under a user's home.
var systemReadOnly = []string{
	"/System/Library", "/System/Cryptexes", "/System/Volumes/Preboot/Cryptexes", "/usr/lib", "/usr/share",
	"/Library/Apple/System/Library", "/private/var/db/timezone", "/private/var/db/dyld",
	"/private/etc/localtime", "/private/etc/passwd", "/private/etc/group", "/private/etc/hosts",
	"/private/etc/protocols", "/private/etc/services",
}

// devices are the character devices a program reads; /dev/null is also writable.
var devices = []string{"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/dtracehelper"}

// sysctls are the names a program may read: the machine's shape (CPU count, page size, memory)
// and the kernel's version. kern.proc.* is not among them, so the process table (ps, the pids
// and arguments of the user's other processes) stays out of reach.
var sysctls = []string{"hw.activecpu", "hw.byteorder", "hw.cachelinesize", "hw.cputype", "hw.cpusubtype",
	"hw.logicalcpu", "hw.logicalcpu_max", "hw.machine", "hw.memsize", "hw.model", "hw.ncpu", "hw.pagesize",
	"hw.physicalcpu", "hw.physicalcpu_max", "kern.argmax", "kern.hostname", "kern.maxfilesperproc",
	"kern.osproductversion", "kern.osrelease", "kern.ostype", "kern.osversion", "kern.usrstack64",
	"kern.version", "sysctl.proc_cputype", "vm.loadavg"}

// sysctlPrefixes are families read whole: CPU features and performance levels.
var sysctlPrefixes = []string{"hw.optional.", "hw.perflevel", "machdep.cpu."}

// Profile is the Seatbelt profile (SBPL) for p. It denies by default and then allows, each
// rule on its own line:
//
//   - fork, and exec of the interpreter and its directories only;
//   - signals and process information within the child's own sandbox only (process-info* to
//     itself), so no other process of the user is visible or reachable;
//   - reading the read-only paths, the devices, and the metadata (stat, not contents) of the
//     directories above every allowed path, which a path lookup needs;
//   - reading and writing the workspace and its temporary directory, and nothing else;
//   - the sysctls above and the one directory-service lookup getpwuid needs;
//   - the network only when p grants it.
//
// Paths are listed sorted and without duplicates, so the same Policy gives the same text.
func Profile(p Policy) string {
	var b strings.Builder
	line := func(s string) { b.WriteString(s + "\n") }
	line("(version 1)")
	line("; mcp-sandbox: one execution's profile, generated (engine/backend/seatbelt).")
	line("(deny default)")

	ro := clean(append(append([]string{p.Python}, p.ReadOnly...), systemReadOnly...))
	rw := clean([]string{p.Workspace, p.Temp})

	line("; processes: fork, exec of the interpreter and its directories, signals and")
	line("; process information inside this sandbox only")
	line("(allow process-fork)")
	line("(allow process-exec" + filters("subpath", clean(append([]string{p.Python}, p.ReadOnly...))) + ")")
	line("(allow signal (target same-sandbox))")
	line("(allow process-info* (target self))")

	line("; reading: the interpreter, its libraries, the read-only paths and the devices")
	line("(allow file-read*" + filters("subpath", ro) + ")")
	line("(allow file-read*" + filters("literal", devices) + ")")
	line("(allow file-read* (subpath \"/dev/fd\"))")
	line("(allow file-write-data (literal \"/dev/null\"))")
	line("; lookups: the metadata of the directories above each allowed path, not their contents")
	line("(allow file-read-metadata" + filters("literal", ancestors(append(append(slices.Clone(ro), rw...), devices...))) + ")")

	line("; reading and writing: the workspace and its temporary directory only")
	line("(allow file-read* file-write*" + filters("subpath", rw) + ")")

	line("; the machine's shape, and the user lookup getpwuid makes")
	line("(allow sysctl-read" + filters("sysctl-name", sysctls) + filters("sysctl-name-prefix", sysctlPrefixes) + ")")
	line("(allow mach-lookup (global-name \"com.apple.system.opendirectoryd.libinfo\"))")

	if p.Network {
		line("; network: granted by the terms")
		line("(allow network*)")
		line("(allow system-socket)")
		line("(allow mach-lookup (global-name \"com.apple.dnssd.service\") (global-name \"com.apple.SystemConfiguration.configd\"))")
	} else {
		line("; network: not granted (every network operation falls to the default deny)")
	}
	return b.String()
}

// clean drops empty and relative paths, cleans the rest, sorts them and drops duplicates and
// any path below another listed one (a subpath filter covers it).
func clean(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p == "" || !path.IsAbs(p) {
			continue
		}
		out = append(out, path.Clean(p))
	}
	slices.Sort(out)
	out = slices.Compact(out)
	kept := out[:0]
	for _, p := range out {
		if n := len(kept); n > 0 && within(p, kept[n-1]) {
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// ancestors are the directories strictly above each path, "/" included, sorted.
func ancestors(paths []string) []string {
	var out []string
	for _, p := range paths {
		for d := path.Dir(p); ; d = path.Dir(d) {
			out = append(out, d)
			if d == "/" || d == "." {
				break
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// filters renders one filter per value, each value an SBPL string, each on a line of its own.
func filters(kind string, values []string) string {
	var b strings.Builder
	for _, v := range values {
		b.WriteString("\n  (" + kind + " " + quote(v) + ")")
	}
	return b.String()
}

// quote renders s as an SBPL string literal: double quotes, with a backslash before a double
// quote or a backslash. Args refuses a policy whose paths hold a control character, the one
// thing SBPL strings could not carry this way.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
