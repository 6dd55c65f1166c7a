package engine

import (
	"context"
	"fmt"
	"io"

	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
)

// Describe reports what the backend is and what it can prove, from a fixed probe: a child is
// started exactly as for an execution, its hello is graded against the Runner's ceiling, and
// it is sent abort, so no program ever runs. The answer is cached; Refresh probes again.
func (r *Runner) Describe(ctx context.Context) *Description {
	r.mu.Lock()
	d := r.desc
	r.mu.Unlock()
	if d != nil {
		return d
	}
	return r.Refresh(ctx)
}

// Refresh probes the backend again and caches the answer.
func (r *Runner) Refresh(ctx context.Context) *Description {
	d := r.probe(ctx)
	d.Fallback = r.opts.Fallback
	r.mu.Lock()
	r.desc = d
	r.mu.Unlock()
	return d
}

func (r *Runner) probe(ctx context.Context) *Description {
	t := r.Terms(Terms{})
	d := &Description{Backend: r.backend.Name(), Isolation: LevelProcess, Guarantees: Guarantees{},
		Mechanisms: r.backend.Mechanisms(), Problems: []string{}, LimitCeiling: r.opts.Ceiling}
	child, err := r.backend.Start(ctx, LaunchSpec{Terms: t, Argv: r.argv(false), Stdout: io.Discard, Stderr: io.Discard})
	if err != nil {
		d.Problems = append(d.Problems, err.Error())
		return d
	}
	defer child.Close()
	defer child.Kill()
	type helloOrErr struct {
		h   *wire.Hello
		err error
	}
	got := make(chan helloOrErr, 1)
	go func() {
		f, err := wire.NewReader(child.Channel(), r.opts.MaxFrame).ReadFrame(wire.TypeHello)
		h, _ := f.(*wire.Hello)
		got <- helloOrErr{h, err}
	}()
	ctx, cancel := context.WithTimeout(ctx, r.opts.HelloTimeout)
	defer cancel()
	var h *wire.Hello
	select {
	case g := <-got:
		if g.err != nil {
			exit := child.Wait()
			d.Problems = append(d.Problems, fmt.Sprintf("the probe child failed before reporting (exit %d %s): %v", exit.Code, exit.Signal, g.err))
			child.Channel().Close()
			return d
		}
		h = g.h
	case <-ctx.Done():
		child.Kill()
		child.Channel().Close()
		d.Problems = append(d.Problems, "the probe child did not report its containment in time")
		<-got
		return d
	}
	_ = wire.NewWriter(child.Channel()).WriteFrame(&wire.Abort{Kind: "describe", Reason: "a describe probe: nothing runs"})
	child.Channel().Close()
	gr := grade(h.Probe, child.Facts(), t, r.opts.EnvAllowlist)
	d.Guarantees, d.Isolation, d.Python = gr.guarantees, gr.isolation, h.Probe.Python
	for _, u := range r.unmet(t, gr) {
		d.Problems = append(d.Problems, fmt.Sprintf("%s is %s: %s", u.Dimension, gr.guarantees.Get(u.Dimension), u.Why))
	}
	d.Ready = len(d.Problems) == 0
	return d
}
