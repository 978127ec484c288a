package pipeline

import "testing"

// successors returns the phases reachable from p in one step.
func successors(p Phase) []Phase {
	var out []Phase
	for _, e := range Table() {
		if e.From == p {
			out = append(out, e.To)
		}
	}
	return out
}

// reachable returns every phase reachable from start (start included).
func reachable(start Phase) map[Phase]bool {
	seen := map[Phase]bool{start: true}
	queue := []Phase{start}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range successors(p) {
			if !seen[q] {
				seen[q] = true
				queue = append(queue, q)
			}
		}
	}
	return seen
}

func TestTable_wellFormed(t *testing.T) {
	t.Parallel()
	seen := map[[2]string]Phase{}
	for _, e := range Table() {
		if !Valid(e.From) || !Valid(e.To) {
			t.Errorf("edge %+v uses an unknown phase", e)
		}
		if !isKnown(e.Event) {
			t.Errorf("edge %+v uses an unknown event type", e)
		}
		k := [2]string{string(e.From), string(e.Event)}
		if to, dup := seen[k]; dup {
			t.Errorf("(%s, %s) listed twice: -> %s and -> %s", e.From, e.Event, to, e.To)
		}
		seen[k] = e.To
	}
}

func isKnown(t EventType) bool {
	for _, u := range EventTypes() {
		if u == t {
			return true
		}
	}
	return false
}

func TestTable_everyPhaseReachableFromPending(t *testing.T) {
	t.Parallel()
	got := reachable(Pending)
	for _, p := range All() {
		if !got[p] {
			t.Errorf("phase %s is not reachable from Pending", p)
		}
	}
}

func TestTable_noTraps(t *testing.T) {
	t.Parallel()
	for _, p := range All() {
		r := reachable(p)
		// Every phase can be deleted, and deletion ends: Finalizing has a Destroyed edge.
		if !r[Finalizing] {
			t.Errorf("phase %s cannot reach Finalizing", p)
		}
		// Every live phase can still converge.
		if p != Finalizing && !r[Applied] {
			t.Errorf("phase %s cannot reach Applied", p)
		}
	}
	if to, ok := Next(Finalizing, EventDestroyed); !ok || to != Finalizing {
		t.Errorf("Next(Finalizing, Destroyed) = %s, %v; want the terminal self-edge", to, ok)
	}
}

func TestTable_failedAndDriftedHaveExits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		from Phase
		want []Phase // phases that must be one step away
	}{
		{Failed, []Phase{Pending, Synthesized, Planned, Applied, Finalizing}},
		{Drifted, []Phase{Applied, Reconverging, Pending, Failed, Finalizing}},
		{Reconverging, []Phase{Applied, Drifted, Failed, Finalizing}},
	}
	for _, tt := range tests {
		t.Run(string(tt.from), func(t *testing.T) {
			t.Parallel()
			next := map[Phase]bool{}
			for _, q := range successors(tt.from) {
				next[q] = true
			}
			for _, w := range tt.want {
				if !next[w] {
					t.Errorf("%s has no edge to %s", tt.from, w)
				}
			}
		})
	}
}

func TestNext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		from Phase
		ev   EventType
		want Phase
		ok   bool
	}{
		{"", EventSynthesized, Synthesized, true},
		{Pending, EventSynthesized, Synthesized, true},
		{Synthesized, EventPlanned, Planned, true},
		{Planned, EventApplied, Applied, true},
		{Applied, EventDrifted, Drifted, true},
		{Drifted, EventReconverging, Reconverging, true},
		{Reconverging, EventPlanned, Reconverging, true},
		{Reconverging, EventApplied, Applied, true},
		{Failed, EventApplied, Applied, true},
		{Applied, EventDeletionRequested, Finalizing, true},
		{Finalizing, EventFailed, Failed, true},
		{Applied, EventSuspended, Applied, true},
		{Pending, EventApplied, "", false},
		{Applied, EventSynthesized, "", false},
		{Finalizing, EventObserved, "", false},
		{Pending, EventDrifted, "", false},
		{Applied, EventDestroyed, "", false},
	}
	for _, tt := range tests {
		got, ok := Next(tt.from, tt.ev)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Next(%q, %s) = %q, %v; want %q, %v", tt.from, tt.ev, got, ok, tt.want, tt.ok)
		}
	}
}

// Valid reports whether p is one of [All].
func Valid(p Phase) bool {
	for _, q := range All() {
		if p == q {
			return true
		}
	}
	return false
}
