package viggy

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// BeatFunc runs one beat and returns its message ("3 drifted field(s)", "AutoCorrect") or an
// error, which marks the beat Failed with the error text as message.
type BeatFunc func(ctx context.Context) (string, error)

// Beats are the seven beats of a pass (docs/dialect.md section 9). A nil beat succeeds with no message.
type Beats struct {
	Observe, Diff, Classify, Decide, Act, Attest, Tick BeatFunc
}

// Order returns the beats in canonical order: Observe first, Tick last.
func Order() []lavav1.Beat {
	return []lavav1.Beat{lavav1.Beat_BEAT_OBSERVE, lavav1.Beat_BEAT_DIFF, lavav1.Beat_BEAT_CLASSIFY,
		lavav1.Beat_BEAT_DECIDE, lavav1.Beat_BEAT_ACT, lavav1.Beat_BEAT_ATTEST, lavav1.Beat_BEAT_TICK}
}

func (b Beats) fn(beat lavav1.Beat) BeatFunc {
	switch beat {
	case lavav1.Beat_BEAT_OBSERVE:
		return b.Observe
	case lavav1.Beat_BEAT_DIFF:
		return b.Diff
	case lavav1.Beat_BEAT_CLASSIFY:
		return b.Classify
	case lavav1.Beat_BEAT_DECIDE:
		return b.Decide
	case lavav1.Beat_BEAT_ACT:
		return b.Act
	case lavav1.Beat_BEAT_ATTEST:
		return b.Attest
	}
	return b.Tick
}

// PassResult is what [RunPass] reports.
type PassResult struct {
	// Beats has one report per beat, in [Order].
	Beats []*lavav1.BeatReport
	// Failed is true when a beat other than Attest failed.
	Failed bool
	// Decided is true when Decide ran and succeeded (the decision is kept only then).
	Decided bool
	// Started and Ended bound the pass (UTC).
	Started, Ended time.Time
}

// RunPass runs the beats in canonical order with now as the clock. A failing Observe, Diff,
// Classify, Decide, Act or Tick marks that beat Failed and every later beat Skipped (no
// times); a failing Attest is recorded as Failed but the pass goes on to Tick (docs/dialect.md section 9).
// A panicking beat is reported as failed.
func RunPass(ctx context.Context, b Beats, now func() time.Time) PassResult {
	res := PassResult{Started: now().UTC()}
	for _, beat := range Order() {
		rep := &lavav1.BeatReport{Beat: beat}
		res.Beats = append(res.Beats, rep)
		if res.Failed {
			rep.Status = lavav1.BeatStatus_BEAT_STATUS_SKIPPED
			continue
		}
		rep.StartedAt = timestamppb.New(now().UTC())
		msg, err := runBeat(ctx, b.fn(beat))
		rep.EndedAt = timestamppb.New(now().UTC())
		rep.Message = msg
		rep.Status = lavav1.BeatStatus_BEAT_STATUS_OK
		if err != nil {
			rep.Status = lavav1.BeatStatus_BEAT_STATUS_FAILED
			rep.Message = err.Error()
			if beat != lavav1.Beat_BEAT_ATTEST {
				res.Failed = true
			}
		}
		if beat == lavav1.Beat_BEAT_DECIDE && err == nil {
			res.Decided = true
		}
	}
	res.Ended = now().UTC()
	return res
}

func runBeat(ctx context.Context, f BeatFunc) (msg string, err error) {
	if f == nil {
		return "", nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f(ctx)
}
