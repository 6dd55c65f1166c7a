//go:build linux

package namespaces

// ForkAll has every child of b forked from a template, not only a warm pool's: the contract
// suite runs on forked children without idle warm ones, which it would take for survivors.
func ForkAll(o *Options) { o.Template, o.forkAll = true, true }

// RecycleAfter has b's templates succeeded after n children rather than templateChildren.
func RecycleAfter(o *Options, n int) { o.recycleAfter = n }

// WaitSuccessors waits until no template of b is being succeeded or ended.
func WaitSuccessors(b *Backend) { b.tpl.wg.Wait() }
