//go:build linux

package namespaces

import "github.com/mcp-sandbox/mcp-sandbox/internal/launch"

// ForkAll has every child of b forked from a template, not only a warm pool's: the contract
// suite runs on forked children without idle warm ones, which it would take for survivors.
func ForkAll(o *Options) { o.Template, o.forkAll = true, true }

// RecycleAfter has b's templates succeeded after n children rather than templateChildren.
func RecycleAfter(o *Options, n int) { o.recycleAfter = n }

// WaitSuccessors waits until no template of b is being succeeded or ended.
func WaitSuccessors(b *Backend) { b.tpl.wg.Wait() }

// Expose binds dir, writable, into the root of o's templates: their children see it in their
// mount namespace, though no Landlock rule of theirs grants it.
func Expose(o *Options, dir string) {
	o.expose = append(o.expose, launch.Bind{Path: dir, Writable: true})
}

// NoLandlock has o's templates send their children an empty Landlock ruleset: what a child
// reaches then is what its mount namespace and file permissions allow.
func NoLandlock(o *Options) { o.noLandlock = true }

// WithholdLandlock has o's templates send their children an empty Landlock ruleset while
// their facts still claim Landlock: a child whose ruleset did not go in, which the host's
// fail-closed check (engine: separated) must refuse before any program byte.
func WithholdLandlock(o *Options) { o.withholdLandlock = true }

// GrantRead adds path to what o's templates' children's Landlock rulesets grant read-only,
// as an interpreter's directory would be.
func GrantRead(o *Options, path string) { o.grantRead = append(o.grantRead, path) }

// PretendLandlockABI has b take abi for the kernel's Landlock ABI.
func PretendLandlockABI(o *Options, abi int) { o.landlockABI = abi }
