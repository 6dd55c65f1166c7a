//go:build linux

package namespaces

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/cgroup"
	"github.com/mcp-sandbox/mcp-sandbox/internal/identity"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch/seccomp"
	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
	"github.com/mcp-sandbox/mcp-sandbox/internal/spawn"
	"github.com/mcp-sandbox/mcp-sandbox/internal/userns"
	"golang.org/x/sys/unix"
)

// templateSource is the template's Python: it loads the bootstrap without running it, then
// forks one child per request on its control socket (fd 3).
//
//go:embed template.py
var templateSource string

// Template recycling: a template forks at most templateChildren children and lives at most
// templateAge; then the next start makes a new one, and the old one ends once its last child
// has. This bounds how long siblings share one address layout and hash key.
const (
	templateChildren = 1000
	templateAge      = 10 * time.Minute
	// maxTemplates bounds the templates a Backend keeps (one per owner and terms); a new one
	// beyond it retires the least recently used.
	maxTemplates = 8
	// templateRetry is how long a Backend execs every child after a template failed to start:
	// without it, each warm start on a host where templates cannot come up would pay for a
	// failed template start before its exec.
	templateRetry = time.Minute
)

// sharedWithSiblings is what a forked child shares with the other children of its template
// (design §4.4): the template's image (address layout, hash key, what it preloaded), its user
// namespace, and its network, IPC and UTS namespaces, which the child's seccomp program,
// Landlock scopes and lack of capabilities leave it nothing of to use (no socket but AF_UNIX,
// no abstract socket or signal beyond its own domain, no SysV IPC or message queue, no
// hostname to set). Its pid and mount namespaces are its own.
var sharedWithSiblings = []string{"address_layout", "hash_key", "preloaded_state", "user_namespace",
	"network_namespace", "ipc_namespace", "uts_namespace"}

// tplKey is what a template was started for: the warm pool's key.
type tplKey struct {
	owner string
	terms engine.Terms
}

// template is one running template: a namespaces child (pid 1 the Go reaper, pid 2 the
// template's interpreter) that forks children on request.
type template struct {
	proc      *spawned.Child
	ctl       *net.UnixConn
	name      string
	workspace string
	started   time.Time
	stderr    *boundedBuffer

	mu     sync.Mutex // one request at a time on ctl; guards forked
	forked int
	// The Backend's templates.mu guards live, retired, succeeding and lastUse.
	live       int  // children not yet closed
	retired    bool // no longer handed out; ends when live reaches 0
	succeeding bool // its successor is being started
	lastUse    time.Time
	closeOne   sync.Once
}

// templates is the Backend's set of templates.
type templates struct {
	mu     sync.Mutex
	byKey  map[tplKey]*template
	closed bool // Close was called: no template is started or kept any more
	// wg counts the goroutines that end retired templates and start successors.
	wg sync.WaitGroup
	// why says, once per reason, why a child was exec'd although templates are on.
	why sync.Map
	// failed is when a template last failed to start, and failedWhy why (guarded by mu).
	failed    time.Time
	failedWhy string
}

// templateWhy says why this Backend cannot fork t's children here, or "" when it can.
func (b *Backend) templateWhy(spec engine.LaunchSpec) string {
	switch {
	case !b.opts.Template:
		return "templates are off (warm.start)"
	case !spec.Pooled && !b.opts.forkAll:
		return "the child is not for a warm pool"
	case spec.Terms.Network != engine.NetworkNone:
		return "a template serves only executions without network"
	}
	if why := b.templateUnusable(); why != "" {
		return why
	}
	b.tpl.mu.Lock()
	defer b.tpl.mu.Unlock()
	if !b.tpl.failed.IsZero() && time.Since(b.tpl.failed) < templateRetry {
		return "a template failed to start (retried a minute later): " + b.tpl.failedWhy
	}
	return ""
}

// templateUnusable says why this host cannot fork children from templates at all, or "".
func (b *Backend) templateUnusable() string {
	if !b.opts.Template {
		return "templates are off (warm.start)"
	}
	if b.disabled("seccomp") {
		return "seccomp is disabled: a forked child installs the policy itself"
	}
	if b.disabled("landlock") {
		return "Landlock is disabled: a forked child installs its rules and scopes itself"
	}
	if abi := b.landlockABI(); abi < launch.TemplateLandlockABI {
		return fmt.Sprintf("this kernel's Landlock ABI is %d, and a forked child needs %d (its file rules, and the scopes "+
			"that keep its signals and abstract sockets from its siblings)", abi, launch.TemplateLandlockABI)
	}
	if slices.Contains(b.childReadOnly(), "/") {
		return "the interpreter's directories include /, which a forked child's Landlock ruleset must leave " +
			"ungranted: its probe shows the host the domain by being refused /"
	}
	if !b.root {
		switch {
		case b.sub == nil:
			return "without root, a forked child needs a uid of its own from the user's subordinate range, and there is none: " +
				"its siblings share the template's user namespace, so RLIMIT_NPROC (counted per namespace and uid) could not " +
				"bound process_count, and a user without root has no per-execution cgroup to bound it instead (" + b.subWhy + ")"
		case b.tplIDs == nil:
			return b.tplIDsWhy
		}
		return ""
	}
	switch {
	case !b.base.Drop:
		return "the identity drop is disabled: a forked child would keep the template's uid"
	case b.tplSub == nil:
		return "the template's uid 0 needs an unprivileged host uid of its own: " + b.tplSubWhy
	}
	uid, gid, n := b.base.IDs.Span()
	if b.tplSub.UID >= uid && b.tplSub.UID < uid+n || b.tplSub.GID >= gid && b.tplSub.GID < gid+n {
		return fmt.Sprintf("root's subordinate id %d is also a run_as identity", b.tplSub.UID)
	}
	if b.base.Cgroups == nil && n == 1 {
		return "no cgroup and one shared run_as identity: RLIMIT_NPROC would count every sibling's processes"
	}
	if why := executableBy(b.base.InitPath, b.tplSub.UID, b.tplSub.GID); why != "" {
		return fmt.Sprintf("the template's host uid %d cannot execute the init helper: %s", b.tplSub.UID, why)
	}
	// The template's helper mounts its root on a directory made in RootBase.
	if why := executableBy(b.opts.RootBase, b.tplSub.UID, b.tplSub.GID); why != "" {
		return fmt.Sprintf("the template's host uid %d cannot reach the root mount points' directory: %s", b.tplSub.UID, why)
	}
	return ""
}

// landlockABI is the kernel's Landlock ABI (or the one a test stands in for it).
func (b *Backend) landlockABI() int {
	if b.opts.landlockABI > 0 {
		return b.opts.landlockABI
	}
	return launch.LandlockABI()
}

// Without root, templateChildIDs is how many uids of the user's subordinate range the forked
// children take (at most; one per child alive, leased), and templateMinIDs the fewest worth
// a template.
const (
	templateChildIDs = 1024
	templateMinIDs   = 16
)

// templateIDs takes, without root, the block of the user's subordinate ranges its templates'
// children run as (tplIDs): the ids just below the range's last three, which are the exec'd
// children's run_as (the last), and what rootless containers map their uids 65535 and 65534
// (nobody) to. Each template maps the block into its user namespace with the user's own uid
// at 0, as an exec'd child's init is (newuidmap): a block of its own for the template's uid 0
// would leave its helper, exec'd before the maps are written, without a capability there.
func (b *Backend) templateIDs() {
	n := min(b.sub.UIDCount, b.sub.GIDCount) - 3
	if n < templateMinIDs {
		b.tplIDsWhy = fmt.Sprintf("the user's subordinate ranges are too small for templates: their children take a uid and gid "+
			"each from below the ranges' last three ids, and want at least %d (there are %d)", templateMinIDs, max(n, 0))
		return
	}
	n = min(n, templateChildIDs)
	uid, gid := b.sub.UID-2-n, b.sub.GID-2-n
	ids, err := identity.Parse(fmt.Sprintf("%d-%d", uid, uid+n-1))
	if err != nil {
		b.tplIDsWhy = err.Error()
		return
	}
	b.tplIDs = ids
	b.tplUIDs = userns.Range{Inside: uid, Outside: uid, Count: n}
	b.tplGIDs = userns.Range{Inside: uid, Outside: gid, Count: n}
}

// childIDs is the pool a forked child's identity is leased from.
func (b *Backend) childIDs() *identity.Pool {
	if b.tplIDs != nil {
		return b.tplIDs
	}
	return b.base.IDs
}

// TemplateWhy says why this Backend's warm pools exec their children instead of forking them
// from templates (Options.Template off, or a prerequisite missing here), or "" when they fork
// (those without network). doctor shows it.
func (b *Backend) TemplateWhy() string { return b.templateUnusable() }

// executableBy says why uid (with gid, and no capability on the host) cannot execute path (or
// search it, a directory), or "": every directory on the way must be searchable by it, as the
// template's helper is exec'd as that uid. A binary in a directory of its owner's alone (a
// home, a build cache) is not.
func executableBy(path string, uid, gid int) string {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err.Error()
	}
	allowed := func(st *syscall.Stat_t, bit uint32) bool {
		switch {
		case int(st.Uid) == uid:
			return st.Mode&(bit<<6) != 0
		case int(st.Gid) == gid:
			return st.Mode&(bit<<3) != 0
		}
		return st.Mode&bit != 0
	}
	for p := "/"; ; {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return err.Error()
		}
		if p == real {
			if !allowed(&st, 1) {
				return real + " is not executable (or searchable) by others"
			}
			return ""
		}
		if !allowed(&st, 1) {
			return p + " is not searchable by others (mode " + strconv.FormatUint(uint64(st.Mode&0o777), 8) + ")"
		}
		rest, _ := strings.CutPrefix(real, strings.TrimSuffix(p, "/")+"/")
		next, _, _ := strings.Cut(rest, "/")
		if next == "" {
			return "cannot walk to " + real
		}
		p = filepath.Join(p, next)
	}
}

// startForked forks a child from the template of spec's owner and terms, starting that
// template first when there is none.
func (b *Backend) startForked(ctx context.Context, spec engine.LaunchSpec) (engine.Child, error) {
	t, err := b.template(ctx, tplKey{owner: spec.Owner, terms: spec.Terms}, spec.Argv)
	if err != nil {
		if ctx.Err() == nil {
			b.tpl.mu.Lock()
			b.tpl.failed, b.tpl.failedWhy = time.Now(), err.Error()
			b.tpl.mu.Unlock()
		}
		return nil, err
	}
	c, err := b.fork(ctx, t, spec)
	if err != nil {
		b.release(t)
		b.retire(t) // a template that failed a fork is not asked again
		return nil, err
	}
	return c, nil
}

// template returns k's template, ready, with one more live child counted on it.
func (b *Backend) template(ctx context.Context, k tplKey, argv []string) (*template, error) {
	b.tpl.mu.Lock()
	if b.tpl.byKey == nil {
		b.tpl.byKey = map[tplKey]*template{}
	}
	t := b.tpl.byKey[k]
	if t != nil {
		n, limit, age := t.forkedCount(), b.recycleAfter(), time.Since(t.started)
		switch {
		case n >= 2*limit || age > 2*templateAge:
			// Its successor never came up: stop using it all the same.
			b.retireLocked(k, t)
			t = nil
		case (n >= limit || age > templateAge) && !t.succeeding && !b.tpl.closed:
			// Start its successor now and keep forking from it until that one is ready: a
			// recycle never stalls an execution.
			t.succeeding = true
			b.tpl.wg.Add(1)
			go b.succeed(k, t, argv)
		}
	}
	if t != nil {
		t.live++
		t.lastUse = time.Now()
		b.tpl.mu.Unlock()
		return t, nil
	}
	b.tpl.mu.Unlock()
	t, err := b.startTemplate(ctx, k, argv)
	if err != nil {
		return nil, err
	}
	b.tpl.mu.Lock()
	defer b.tpl.mu.Unlock()
	if old := b.tpl.byKey[k]; old != nil {
		b.retireLocked(k, old) // another start won the race; the newer serves
	}
	if len(b.tpl.byKey) >= maxTemplates {
		var lru tplKey
		var oldest *template
		for key, o := range b.tpl.byKey {
			if oldest == nil || o.lastUse.Before(oldest.lastUse) {
				lru, oldest = key, o
			}
		}
		b.retireLocked(lru, oldest)
	}
	b.tpl.byKey[k] = t
	t.live++
	t.lastUse = time.Now()
	return t, nil
}

// recycleAfter is how many children a template forks before its successor is started.
func (b *Backend) recycleAfter() int {
	if b.opts.recycleAfter > 0 {
		return b.opts.recycleAfter
	}
	return templateChildren
}

// succeed starts old's successor for k and puts it in old's place once it is ready; old then
// ends with its last child. A successor that fails to start leaves old in place, to be tried
// again at the next start.
func (b *Backend) succeed(k tplKey, old *template, argv []string) {
	defer b.tpl.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t, err := b.startTemplate(ctx, k, argv)
	b.tpl.mu.Lock()
	defer b.tpl.mu.Unlock()
	old.succeeding = false
	if err != nil {
		b.logTemplateWhy("a template's successor did not start: " + err.Error())
		return
	}
	if b.tpl.closed {
		b.endLater(t)
		return
	}
	if cur := b.tpl.byKey[k]; cur != nil {
		b.retireLocked(k, cur)
	}
	t.lastUse = time.Now()
	b.tpl.byKey[k] = t
}

// retire stops handing t out; it ends once its last child has.
func (b *Backend) retire(t *template) {
	b.tpl.mu.Lock()
	defer b.tpl.mu.Unlock()
	for k, o := range b.tpl.byKey {
		if o == t {
			b.retireLocked(k, t)
			return
		}
	}
	if !t.retired {
		b.markRetired(t)
	}
}

func (b *Backend) retireLocked(k tplKey, t *template) {
	delete(b.tpl.byKey, k)
	b.markRetired(t)
}

// markRetired stops handing t out and ends it now when it has no live child (called with
// templates.mu held).
func (b *Backend) markRetired(t *template) {
	t.retired = true
	if t.live == 0 {
		b.endLater(t)
	}
}

// endLater ends t in a goroutine Close waits for.
func (b *Backend) endLater(t *template) {
	b.tpl.wg.Add(1)
	go func() { defer b.tpl.wg.Done(); t.close() }()
}

// release counts one child of t closed; a retired template ends with its last child, because
// its end (pid 1 of its namespace exiting) kills every child still running.
func (b *Backend) release(t *template) {
	b.tpl.mu.Lock()
	t.live--
	end := t.retired && t.live == 0
	b.tpl.mu.Unlock()
	if end {
		t.close()
	}
}

// Close ends every template once its children have ended, and removes the cgroups kept for
// children to come. It is idempotent; the Runner calls it when it closes.
func (b *Backend) Close() error {
	b.tpl.mu.Lock()
	b.tpl.closed = true
	for k, t := range b.tpl.byKey {
		b.retireLocked(k, t)
	}
	b.tpl.mu.Unlock()
	b.tpl.wg.Wait() // the ends retireLocked started, and any successor starting
	if b.base.Cgroups != nil {
		return b.base.Cgroups.Close()
	}
	return nil
}

func (t *template) forkedCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.forked
}

// close ends the template: its control socket closes, and it exits by itself, waited for
// (bounded), before its namespace is killed. A template killed with its namespace would be
// reaped by the kernel unaccounted, and the CPU of every child it forked would vanish from
// the host's children time; exiting, it is reaped by its init, which the host reaps.
func (t *template) close() {
	t.closeOne.Do(func() {
		t.ctl.CloseWrite()
		exited := make(chan struct{})
		go func() { t.proc.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(2 * time.Second):
		}
		t.proc.Close()
	})
}

// startTemplate starts a template for k: the init helper in a user namespace of the pool's
// own (even on a root host: uid 0 inside is root's last subordinate uid outside, an
// unprivileged host uid, and the run_as identities are mapped to themselves), with the same
// mount, pid, network, IPC and UTS namespaces and root as an exec'd child; pid 2 keeps only launch.TemplateCaps,
// loads seccomp.TemplatePolicy and execs the template's interpreter.
func (b *Backend) startTemplate(ctx context.Context, k tplKey, argv []string) (*template, error) {
	if len(argv) < 7 || argv[0] != "-I" || argv[1] != "-c" {
		return nil, fmt.Errorf("unexpected interpreter arguments for a template")
	}
	filter, err := seccomp.TemplateChildBytes(true)
	if err != nil {
		return nil, err
	}
	// 0755: the helper that mounts on it is the template's host uid, not root.
	tag, root, err := b.rootMountPoint(0o755)
	if err != nil {
		return nil, err
	}
	workspace := "/workspace-" + tag
	t := &template{name: "tpl-" + tag, workspace: workspace, stderr: &boundedBuffer{max: 4096}}
	t.proc = &spawned.Child{Proc: &spawn.Proc{Status: true}}
	t.proc.Cleanup = append(t.proc.Cleanup, func() { _ = os.Remove(root) })
	ok := false
	defer t.proc.CloseUnless(&ok)
	// argv is the bootstrap's: -I -c SOURCE CANARY PORT4 PORT6 MAXVALUE MODE.
	// Without site, as an exec'd child's interpreter runs (internal/python): every child
	// inherits the template's heap, and site's imports were a third of it.
	targv := append([]string{b.base.Python}, b.base.Interpreter.SourceArgv([]string{"-I", "-c", templateSource, argv[3], argv[4], argv[5],
		argv[6], workspace, hex.EncodeToString(filter), hex.EncodeToString(b.childLandlock(workspace))})...)
	ls := &launch.Spec{
		Python: b.base.Python, Argv: targv, Env: spawn.Env(workspace, b.opts.Env), Dir: "/",
		ChannelParent: true, Reaper: true, Template: true, UserNamespace: true,
		Rlimits:  launch.Rlimits{NoFile: 1024},
		DenyInet: true, Seccomp: true,
		Mounts: &launch.Mounts{
			Root: root, ReadOnly: slices.Concat(spawned.SystemPaths, b.base.RODirs), Devices: spawned.Devices,
			Files:     b.etcFiles(),
			Workspace: workspace, WorkspaceBytes: 1 << 20, TmpBytes: 1 << 20,
			Proc: true, Loopback: true, Hostname: "sandbox",
			Binds: b.opts.expose,
		},
	}
	attr := &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
			syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
	}
	if b.root {
		uid, gid, n := b.base.IDs.Span()
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: b.tplSub.UID, Size: 1}, {ContainerID: uid, HostID: uid, Size: n}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: b.tplSub.GID, Size: 1}, {ContainerID: gid, HostID: gid, Size: n}}
		attr.GidMappingsEnableSetgroups = true
		// The helper is cloned as the host's root, which this namespace does not map: it becomes
		// uid 0 inside (the subordinate uid outside) before it execs.
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0}
	} else {
		// newuidmap and newgidmap map the user's own ids at 0 and the children's block of its
		// subordinate ranges once the helper has started; it waits for them, and its first
		// process, exec'd once they are written, holds the template's capabilities there.
		t.proc.Proc.MapIDs = func(pid int) error {
			return b.sub.MapRanges(ctx, pid, []userns.Range{{Inside: 0, Outside: os.Geteuid(), Count: 1}, b.tplUIDs},
				[]userns.Range{{Inside: 0, Outside: os.Getegid(), Count: 1}, b.tplGIDs})
		}
	}
	if err := t.proc.Start(b.base.InitPath, ls, attr, t.stderr, t.stderr); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "starting a template: %v", err)
	}
	ctl, isUnix := t.proc.Conn().(*net.UnixConn)
	if !isUnix {
		return nil, fmt.Errorf("the template's control socket is not a unix socket")
	}
	t.ctl = ctl
	source := binary.LittleEndian.AppendUint64(nil, uint64(len(argv[2])))
	if _, err := ctl.Write(append(source, argv[2]...)); err != nil {
		return nil, failure.New(failure.BackendUnavailable, "the template did not come up (%v): %s", err, t.stderr.String())
	}
	// Ready: 32 bytes, "ready PYTHON-VERSION". The start takes an interpreter start and the
	// preloads; ctx bounds it, and so does the template's end (its socket closes).
	var ready [32]byte
	err = untilDone(ctx, ctl, func() error {
		_, err := io.ReadFull(ctl, ready[:])
		return err
	})
	if err != nil || !bytes.HasPrefix(ready[:], []byte("ready ")) {
		return nil, failure.New(failure.BackendUnavailable, "the template did not come up (%v): %s", err, t.stderr.String())
	}
	t.started = time.Now()
	ok = true
	return t, nil
}

// childLandlock is the Landlock ruleset every child of a template with the given workspace
// mount point installs (launch.LandlockRuleset), built here so that the template writes no
// policy: read (and execute) the system paths, the interpreter's directories, the root's /etc
// files, the devices and the child's own /proc; read and write its workspace, /tmp and
// /dev/null. Nothing else, whatever the child's mount namespace shows. The scopes keep its
// signals and abstract unix sockets to itself and its own processes. Empty with noLandlock
// or withholdLandlock.
func (b *Backend) childLandlock(workspace string) []byte {
	if b.opts.noLandlock || b.opts.withholdLandlock {
		return nil
	}
	return launch.LandlockRuleset(&launch.Landlock{ReadOnly: b.childReadOnly(), ReadWrite: []string{workspace, "/tmp", "/dev/null"}})
}

// childReadOnly is what a template's child's Landlock ruleset grants read-only. It must not
// hold / itself (templateUnusable): the child's probe shows its domain by being refused /.
func (b *Backend) childReadOnly() []string {
	devices := slices.DeleteFunc(slices.Clone(spawned.Devices), func(d string) bool { return d == "/dev/null" })
	return slices.Concat(spawned.SystemPaths, b.base.RODirs, slices.Sorted(maps.Keys(b.etcFiles())), devices,
		[]string{"/proc"}, b.opts.grantRead)
}

// etcFiles is the minimal /etc of every forked child's root (etcFiles, home /).
func (b *Backend) etcFiles() map[string]string {
	uid, gid, _ := b.childIDs().Span()
	return etcFiles(uid, gid, "/")
}

// fork asks t for one child: its channel, streams, a status pipe and a go pipe go over as
// descriptors with fixed numeric fields, never a string. The template forks the child, pid 1
// of a pid namespace of its own, keeps the status pipe (it reaps the child and reports its
// end there) and answers with the child's pidfd; the host joins the child to the execution's
// cgroup and lets it go on to confine itself and run the bootstrap.
func (b *Backend) fork(ctx context.Context, t *template, spec engine.LaunchSpec) (_ engine.Child, err error) {
	c := &forked{t: t, b: b, copied: make(chan struct{}), ended: make(chan struct{}), waited: make(chan struct{})}
	c.facts = engine.Facts{MountBoundary: true, PIDNamespace: true, NetNamespace: true, Seccomp: true}
	defer func() {
		if err != nil {
			c.closeResources()
		}
	}()
	c.facts.Landlock, c.facts.SignalScoped = !b.opts.noLandlock, !b.opts.noLandlock
	id, release, err := b.childIDs().Lease(ctx, spec.Ahead)
	if err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	c.cleanup = append(c.cleanup, release)
	if id.UID == 0 || id.GID == 0 {
		return nil, fmt.Errorf("run_as %d:%d: a forked child must not stay uid 0", id.UID, id.GID)
	}
	c.facts.HostUID, c.facts.RunAsUID, c.facts.ExclusiveUID = os.Geteuid(), id.UID, id.Exclusive
	if !b.root {
		c.facts.HostUID = 0 // the grade compares uids as the child sees them: the user's is 0 there
	}
	// RLIMIT_NPROC counts per (user namespace, uid): exact for an exclusive uid, shared with
	// the siblings otherwise, when only the cgroup below binds the tree.
	c.facts.UserNamespace = id.Exclusive
	// The child's ends are plain descriptors, closed once sent: as *os.File each would be
	// made the runtime poller's (fcntl, epoll_ctl), made blocking again by Fd and taken off
	// the poller at its close, for nothing (docs/design.md §19.11).
	var closeAfter []int
	defer func() {
		for _, fd := range closeAfter {
			unix.Close(fd)
		}
	}()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	closeAfter = append(closeAfter, fds[1])
	hostEnd := os.NewFile(uintptr(fds[0]), "channel")
	conn, err := net.FileConn(hostEnd)
	hostEnd.Close()
	if err != nil {
		return nil, err
	}
	c.conn = conn
	var streams []int
	for _, sink := range []io.Writer{spec.Stdout, spec.Stderr} {
		r, w, err := childPipe()
		if err != nil {
			return nil, err
		}
		closeAfter = append(closeAfter, w)
		streams = append(streams, w)
		c.readEnd = append(c.readEnd, r)
		c.copies.Add(1)
		go func(sink io.Writer, r *os.File) {
			defer c.copies.Done()
			_, _ = io.Copy(sink, r)
		}(sink, r)
	}
	go func() { c.copies.Wait(); close(c.copied) }()
	statusR, statusW, err := childPipe()
	if err != nil {
		return nil, err
	}
	c.status = statusR
	closeAfter = append(closeAfter, statusW)
	var gop [2]int // the go pipe: the child reads its end, the host writes one byte to its own
	if err := unix.Pipe2(gop[:], unix.O_CLOEXEC); err != nil {
		return nil, os.NewSyscallError("pipe2", err)
	}
	goR, goW := gop[0], gop[1]
	closeAfter = append(closeAfter, goR)
	defer unix.Close(goW)
	if m := b.base.Cgroups; m != nil {
		g, err := m.New(owner.Name("nsf"), spec.Terms.MemoryBytes, spec.Terms.ProcessCount+1)
		if err != nil {
			return nil, failure.Wrap(failure.BackendUnavailable, err, "creating the execution's cgroup failed")
		}
		c.group = g
		c.facts.Cgroup = true
	}
	var tag [8]byte
	_, _ = rand.Read(tag[:])
	c.workspace = fmt.Sprintf("%s/%016x", t.workspace, binary.LittleEndian.Uint64(tag[:]))
	nproc := int64(spec.Terms.ProcessCount)
	if c.group != nil && !id.Exclusive {
		nproc = 0 // the pids cgroup binds the tree; a shared uid's count would include siblings
	}
	ws := b.opts.WorkspaceBytes
	req := []int64{0, int64(id.UID), int64(id.GID), int64(engine.CPURlimit(spec.Terms.CPUSeconds)),
		int64(engine.CPUHardRlimit(spec.Terms.CPUSeconds)), spec.Terms.MemoryBytes, spec.Terms.FileSizeBytes, nproc, 1024,
		ws, b.opts.TmpBytes, int64(binary.LittleEndian.Uint64(tag[:]))}
	msg := make([]byte, 8*len(req))
	for i, v := range req {
		binary.LittleEndian.PutUint64(msg[8*i:], uint64(v))
	}
	rights := unix.UnixRights(fds[1], streams[0], streams[1], statusW, goR)
	t.mu.Lock()
	_, pidfd, err := t.request(ctx, msg, rights)
	if err == nil {
		t.forked++
		c.children = t.forked
	}
	t.mu.Unlock()
	if err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "the template did not fork a child: %v", err)
	}
	hostPid, err := pidOfPidfd(pidfd)
	if err == nil {
		err = unix.SetNonblock(pidfd, true)
	}
	if err != nil {
		unix.Close(pidfd)
		return nil, err
	}
	// Non-blocking, the pidfd is the runtime poller's: the wait for the child's end holds no
	// thread in a system call (design §19.3).
	c.pidfd = os.NewFile(uintptr(pidfd), "pidfd")
	c.hostPid = hostPid
	if c.group != nil {
		if err := c.group.Join(hostPid); err != nil {
			return nil, failure.Wrap(failure.BackendUnavailable, err, "joining the execution's cgroup failed (%v): %s", err, t.stderr.String())
		}
	}
	if _, err := unix.Write(goW, []byte{1}); err != nil {
		return nil, fmt.Errorf("releasing the forked child: %w", os.NewSyscallError("write", err))
	}
	age := time.Since(t.started).Seconds()
	c.facts.Forked = &engine.StartInfo{Kind: engine.StartForked, Template: t.name, TemplateAgeSeconds: &age,
		TemplateChildren: &c.children, SharedWithSiblings: sharedWithSiblings}
	go c.wait()
	return c, nil
}

// request sends one fork request and reads its answer: the child's pid in the template's
// namespace and a pidfd of it. Called with t.mu held.
func (t *template) request(ctx context.Context, msg, rights []byte) (int, int, error) {
	var reply [16]byte
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	err := untilDone(ctx, t.ctl, func() error {
		if _, _, err := t.ctl.WriteMsgUnix(msg, rights, nil); err != nil {
			return err
		}
		var err error
		n, oobn, _, _, err = t.ctl.ReadMsgUnix(reply[:], oob)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	var fds []int
	if cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range cmsgs {
			if got, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	if n != len(reply) || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		pid := int64(binary.LittleEndian.Uint64(reply[8:]))
		if n == len(reply) && pid < 0 {
			return 0, 0, fmt.Errorf("fork: %v", syscall.Errno(-pid))
		}
		return 0, 0, fmt.Errorf("a malformed answer (%d bytes, %d descriptors)", n, len(fds))
	}
	unix.CloseOnExec(fds[0])
	return int(binary.LittleEndian.Uint64(reply[8:])), fds[0], nil
}

// untilDone runs fn, which reads and writes conn, and cuts it short when ctx ends first (a
// deadline in the past); when it returns, conn has no deadline left, whichever came first.
func untilDone(ctx context.Context, conn net.Conn, fn func() error) error {
	done := make(chan struct{})
	cut := make(chan struct{})
	go func() {
		defer close(cut)
		select {
		case <-ctx.Done():
			_ = conn.SetDeadline(time.Now())
		case <-done:
		}
	}()
	err := fn()
	close(done)
	<-cut
	_ = conn.SetDeadline(time.Time{})
	return err
}

// childPipe makes a pipe whose read end is the host's, a file of the runtime's poller, and
// whose write end, a plain blocking descriptor as os.Pipe's is once its Fd is taken, goes to
// the child: made so, the write end costs no poller work (docs/design.md §19.11).
func childPipe() (*os.File, int, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, -1, os.NewSyscallError("pipe2", err)
	}
	if err := unix.SetNonblock(p[1], false); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, -1, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(p[0]), "pipe"), p[1], nil
}

// pidOfPidfd is the host pid of the process pidfd refers to, from its fdinfo, read with plain
// system calls (cgroup.ReadFile: not the runtime poller's work, docs/design.md §19.11).
func pidOfPidfd(pidfd int) (int, error) {
	b, err := cgroup.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(pidfd))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || pid <= 0 {
				return 0, fmt.Errorf("the forked child is gone already")
			}
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no pid in the pidfd's fdinfo")
}

// awaitReadable blocks until f, a non-blocking descriptor of the runtime's poller (a pidfd),
// is readable, parked in the poller rather than in a system call. Each wake is checked with
// a poll(2) that does not wait: the poller's readiness may have been cleared before the
// first wait, and a pidfd stays readable once its process has exited.
func awaitReadable(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		if err != nil && err != unix.EINTR {
			perr = err
			return true
		}
		return n > 0
	})
	if err == nil {
		err = perr
	}
	return err
}

// forked is a child forked from a template: the program's interpreter, pid 1 of its own pid
// namespace, whose end the template (its parent) reports on the status pipe.
type forked struct {
	t         *template
	b         *Backend
	facts     engine.Facts
	conn      net.Conn
	pidfd     *os.File // the child's, non-blocking: wait polls it through the runtime
	hostPid   int
	workspace string // inside the child
	children  int
	group     *cgroup.Group
	status    *os.File
	readEnd   []*os.File
	copies    sync.WaitGroup
	copied    chan struct{}
	cleanup   []func()

	exit   engine.Exit
	ended  chan struct{} // closed when the pidfd turns readable (gone): the child is dead
	waited chan struct{} // closed once its status is read too (exit)
	gone   atomic.Bool   // the pidfd turned readable: the child, and so its pid namespace, exited

	closeOnce sync.Once
	usage     engine.TreeUsage
}

// OutputClosed is closed once both output streams have reached their end (no process holds
// their write ends: the child let go of them before done): the Runner may then return the result
// before the child's teardown, as for an exec'd child.
func (c *forked) OutputClosed() <-chan struct{} { return c.copied }

func (c *forked) Channel() io.ReadWriteCloser { return c.conn }
func (c *forked) Facts() engine.Facts         { return c.facts }

func (c *forked) Workspace() string {
	select {
	case <-c.waited:
		return ""
	default:
		return "/proc/" + strconv.Itoa(c.hostPid) + "/root" + c.workspace
	}
}

// wait blocks until the child has exited (its pidfd turns readable), then reads the status
// the template wrote once it reaped it. No status means the template ended first, or Close
// gave up on it.
func (c *forked) wait() {
	defer close(c.waited)
	if err := awaitReadable(c.pidfd); err != nil {
		c.exit = engine.Exit{Code: -1, Err: err}
		close(c.ended)
		return
	}
	c.gone.Store(true)
	close(c.ended)
	c.exit = engine.Exit{Code: -1, Signal: syscall.SIGKILL.String()}
	b, _ := io.ReadAll(io.LimitReader(c.status, 4096))
	var st launch.Status
	if len(b) > 0 && json.Unmarshal(b, &st) == nil {
		c.exit = engine.Exit{Code: st.Code, CPUSeconds: st.CPUSeconds, RlimitCPUSeconds: st.RlimitCPU}
		if st.Signal != 0 {
			c.exit.Signal = syscall.Signal(st.Signal).String()
		}
	}
}

func (c *forked) Wait() engine.Exit {
	<-c.waited
	return c.exit
}

// InterpreterEnded reports whether the child, the program's interpreter, has exited or is
// exiting (spawn.Exiting): its status then comes once the template is scheduled to reap it
// (docs/design.md §4.6).
func (c *forked) InterpreterEnded() bool {
	if c.gone.Load() {
		return true
	}
	ended := false
	if rc, err := c.pidfd.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { ended = spawn.ExitingPidfd(c.hostPid, int(fd)) })
	}
	return ended
}

// Kill kills the child's pid namespace (SIGKILL to its pid 1) and its cgroup. Once the child
// has exited (gone), the group is not read to be signalled: the kernel kills every other
// process of a pid namespace and waits them out before its pid 1's exit shows on the pidfd,
// only the child and its descendants joined the group, and Close's Remove still kills
// whatever the group holds.
func (c *forked) Kill() {
	if c.pidfd != nil {
		if rc, err := c.pidfd.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { _ = unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0) })
		}
	}
	if c.group != nil && !c.gone.Load() {
		c.group.Signal()
	}
}

// Close kills what is left, drains the output (bounded), reads and removes the cgroup, and
// counts the child off its template. It is idempotent.
func (c *forked) Close() engine.TreeUsage {
	c.closeOnce.Do(func() {
		c.Kill()
		// The child's death decides whether the tree died, not the template's report of it,
		// which a busy host may schedule late: that closes the status pipe at the latest
		// (closeResources), and Wait's exit then reads as the SIGKILL it was.
		if !spawn.AwaitKilled(c.ended, c.hostPid, spawn.KillGrace) {
			c.usage.Escaped, c.usage.EscapedWhy = true, "the forked child was still running, and not dying, "+
				spawn.KillGrace.String()+" after SIGKILL"
		}
		select {
		case <-c.copied:
		case <-time.After(2 * time.Second):
			for _, r := range c.readEnd {
				r.Close()
			}
			<-c.copied
		}
		if c.group != nil {
			// Removed here, not in closeResources, so that one read of its counters is both
			// this execution's events and a kept group's base (cgroup: RemoveEvents).
			ev, _ := c.group.RemoveEvents()
			c.usage.OOMKilled, c.usage.PIDsLimitHit = ev.OOMKills > 0, ev.PIDsMax > 0
		}
		c.closeResources()
		c.b.release(c.t)
	})
	return c.usage
}

// closeResources releases what the host holds for the child (also for one that never
// started: then it is all there is to undo).
func (c *forked) closeResources() {
	for _, r := range c.readEnd {
		r.Close()
	}
	if c.conn != nil {
		c.conn.Close()
	}
	if c.status != nil {
		c.status.Close()
	}
	if c.group != nil {
		_ = c.group.Remove()
	}
	if c.pidfd != nil {
		c.pidfd.Close()
	}
	for _, f := range c.cleanup {
		f()
	}
	c.cleanup = nil
}

// boundedBuffer keeps the first max bytes written to it: a template's own stderr, for the
// reason it did not come up.
type boundedBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (w *boundedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(w.buf.String())
}

// logTemplateWhy logs, once per reason, why a child was exec'd although templates are on.
func (b *Backend) logTemplateWhy(why string) {
	if _, seen := b.tpl.why.LoadOrStore(why, true); !seen {
		slog.Info("warm children are exec'd, not forked from a template", "why", why)
	}
}
