package spawned

// SystemPaths are the host paths every interpreter reads besides its own directories
// (Base.RODirs): the system's binaries and libraries, the loader's cache, the time zone, the
// alternatives' links, and Debian's matplotlib settings (its only place for them). The namespaces and bwrap backends bind them read-only into a root
// of their own; the process backend grants them read-only under Landlock, with what it adds
// there (process_linux.go). A path the host lacks is passed over.
var SystemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives", "/etc/matplotlibrc"}

// Devices are the device nodes a program may open. The namespaces backend binds them into its
// root, and the process backend grants them under Landlock; bwrap makes its own /dev.
var Devices = []string{"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"}
