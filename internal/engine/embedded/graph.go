package embedded

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"
)

// workers runs functions on goroutines kept alive for a while after their last one: a walk's
// node (a provider call, expression evaluation) grows a fresh goroutine's stack several times,
// and runtime.copystack was about 5% of a no-op plan's CPU in a profile, so the nodes of the
// next walk run on stacks already grown. A function goes to an idle worker if one is waiting,
// else to a new one; a worker idle for idle ends. The zero value is not usable: newWorkers.
type workers struct {
	jobs  chan func()
	idle  time.Duration
	alive atomic.Int64
}

func newWorkers(idle time.Duration) *workers {
	return &workers{jobs: make(chan func()), idle: idle}
}

// nodeWorkers runs the nodes of every walk.
var nodeWorkers = newWorkers(time.Minute)

// run runs f on an idle worker or a new one; it never waits for a worker.
func (w *workers) run(f func()) {
	select {
	case w.jobs <- f:
	default:
		w.alive.Add(1)
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	defer w.alive.Add(-1)
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		f()
		t.Reset(w.idle)
		select {
		case f = <-w.jobs:
		case <-t.C:
			return
		}
	}
}

// walk runs fn for every node once all of its dependencies (deps[node], restricted to nodes)
// have finished without error, at most limit at a time. When fn fails, the node's dependents
// never run; with keepGoing the other nodes still do (Terraform's apply), without it nothing
// new starts. Running calls always finish, and the errors are returned joined. A cycle is an
// error before anything runs.
func walk(ctx context.Context, nodes []string, deps map[string][]string, limit int, keepGoing bool, fn func(context.Context, string) error) error {
	if limit <= 0 {
		limit = 1
	}
	in := map[string]bool{}
	for _, n := range nodes {
		in[n] = true
	}
	pending := map[string]int{}
	dependents := map[string][]string{}
	for _, n := range nodes {
		seen := map[string]bool{}
		for _, d := range deps[n] {
			if in[d] && d != n && !seen[d] {
				seen[d] = true
				pending[n]++
				dependents[d] = append(dependents[d], n)
			}
		}
	}
	if err := checkCycle(nodes, pending, dependents); err != nil {
		return err
	}
	var ready []string
	for _, n := range nodes {
		if pending[n] == 0 {
			ready = append(ready, n)
		}
	}
	sort.Strings(ready)
	type result struct {
		node string
		err  error
	}
	done := make(chan result)
	running := 0
	var errs []error
	failed := false
	for len(ready) > 0 || running > 0 {
		for !failed && len(ready) > 0 && running < limit && ctx.Err() == nil {
			n := ready[0]
			ready = ready[1:]
			running++
			nodeWorkers.run(func() { done <- result{n, callNode(ctx, n, fn)} })
		}
		if running == 0 {
			break
		}
		r := <-done
		running--
		if r.err != nil {
			errs = append(errs, r.err)
			failed = !keepGoing
			continue
		}
		for _, d := range dependents[r.node] {
			pending[d]--
			if pending[d] == 0 {
				ready = append(ready, d)
			}
		}
	}
	if len(errs) == 0 && ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.Join(errs...)
}

// callNode runs fn for node n, turning a panic into n's error: a bug in a node's code (or
// in a library it calls on a provider's answer) fails that node, as an error would, instead
// of ending the process with every other operation it runs.
func callNode(ctx context.Context, n string, fn func(context.Context, string) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: internal error (a bug in Lava, please report it): panic: %v", n, r)
		}
	}()
	return fn(ctx, n)
}

func checkCycle(nodes []string, pending map[string]int, dependents map[string][]string) error {
	left := map[string]int{}
	var queue []string
	for _, n := range nodes {
		left[n] = pending[n]
		if left[n] == 0 {
			queue = append(queue, n)
		}
	}
	seen := 0
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		seen++
		for _, d := range dependents[n] {
			left[d]--
			if left[d] == 0 {
				queue = append(queue, d)
			}
		}
	}
	if seen == len(nodes) {
		return nil
	}
	var cyc []string
	for _, n := range nodes {
		if left[n] > 0 {
			cyc = append(cyc, n)
		}
	}
	sort.Strings(cyc)
	return fmt.Errorf("dependency cycle between %v", cyc)
}

// reverseDeps inverts a dependency map over nodes: a node's dependents become its
// dependencies (destroy order).
func reverseDeps(nodes []string, deps map[string][]string) map[string][]string {
	out := map[string][]string{}
	for _, n := range nodes {
		for _, d := range deps[n] {
			out[d] = append(out[d], n)
		}
	}
	return out
}
