//go:build linux

package namespaces

// ForkAll has every child of b forked from a template, not only a warm pool's: the contract
// suite runs on forked children without idle warm ones, which it would take for survivors.
func ForkAll(o *Options) { o.Template, o.forkAll = true, true }
