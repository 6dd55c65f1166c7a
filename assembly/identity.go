package assembly

import (
	"fmt"
	"os"
	"os/user"
	"slices"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/userns"
)

// hostUser is who this process runs as, for the identity advice: its euid and name.
func hostUser() (int, string) {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return os.Geteuid(), name
}

// identityAdvice says how a host that is not root could give its programs more than its own
// uid: a kernel boundary around them when the namespaces backend is unavailable (nsWhy, which
// names the setting that blocks user namespaces and the command that changes it), otherwise
// a uid of their own (a subordinate id range). It is "" as root, and when the host has both.
func identityAdvice(euid int, name, nsWhy string, h userns.Host) string {
	if euid == 0 {
		return ""
	}
	if nsWhy != "" {
		return "for a kernel boundary around them: " + nsWhy
	}
	if _, why := h.Subordinate(name, euid); why != "" {
		return "for a uid of their own: " + why
	}
	return ""
}

// hostIdentityAdvice is identityAdvice for this process and profile p, on this host.
func (e Env) hostIdentityAdvice(p configs.Profile) string {
	euid, name := hostUser()
	if euid <= 0 { // root, or Windows (no uids): no advice to give
		return ""
	}
	return identityAdvice(euid, name, e.namespacesWhy(p), userns.Host{})
}

// identityNote is what doctor says about a profile whose programs run as the host's own uid:
// what that leaves in and out of their reach, whether the default accepts it, and the
// advice. It is "" when they run as an identity of their own, or nothing was graded.
func identityNote(euid int, d *engine.Description, advice string) string {
	if euid == 0 || len(d.Guarantees) == 0 || d.Guarantees.Get(engine.DimIdentity) == engine.Enforced {
		return ""
	}
	var note string
	if euid < 0 { // Windows: no uids, and no lesser identity a job could give its child
		return "programs run as your own Windows account in a Job Object, which is no identity boundary: they could read " +
			"what you can; Windows has no lesser identity to give them, so the process level runs without one"
	}
	if d.Isolation == engine.LevelIsolated && slices.Contains(d.Mechanisms, "user-namespace") {
		note = fmt.Sprintf("programs run as your own uid %d, inside a user, mount, pid and network namespace of their own: "+
			"your files, processes and network are out of their reach, so the default accepts it", euid)
	} else {
		note = fmt.Sprintf("programs run as your own uid %d with no kernel boundary around them: they could read what you can, "+
			"so the default refuses them (allow_same_uid: true accepts it)", euid)
	}
	if advice != "" {
		note += "; " + advice
	}
	return note
}
