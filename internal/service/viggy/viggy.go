package viggy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
)

// Defaults of [Config].
const (
	DefaultMaxAttempts = 5
	DefaultInterval    = 5 * time.Minute
	DefaultTick        = time.Second
	DefaultConcurrency = 4
)

// DefaultBackoff is the retry schedule when [Config].Backoff is zero: 10s doubling to 10m,
// ±20% jitter.
func DefaultBackoff() bus.Backoff {
	return bus.Backoff{Base: 10 * time.Second, Max: 10 * time.Minute, Jitter: 0.2}
}

// Config configures a [Service]. JS is required.
type Config struct {
	// JS is the JetStream context; the topology must exist (bus.EnsureTopology).
	JS jetstream.JetStream
	// MaxAttempts is how many attempts a stage gets before the resource stalls (default 5).
	MaxAttempts int
	// Backoff is the retry schedule (zero: [DefaultBackoff]).
	Backoff bus.Backoff
	// DefaultInterval is the drift interval of a resource whose ResourceObserved was not seen
	// (default 5m); it is the decision's requeue_after.
	DefaultInterval time.Duration
	// Tick is how often scheduled retries and escalations are checked (default 1s).
	Tick time.Duration
	// Concurrency bounds handlers per consumer (default 4).
	Concurrency int
	// Cluster names the cluster in anomalies (may be empty).
	Cluster string
	// Logger receives one line per pass (default: discard). Never a secret.
	Logger *slog.Logger
	// Registerer receives the viggy metrics (nil: not registered).
	Registerer prometheus.Registerer
	// BusMetrics counts consumed messages (may be nil).
	BusMetrics *bus.Metrics
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Service is viggy. Create it with [New] and run it with [Service.Run].
type Service struct {
	cfg     Config
	kv      jetstream.KeyValue
	pub     *bus.Publisher
	metrics *metrics
}

// New ensures the [Bucket] and registers the metrics lava_viggy_passes_total{final_phase},
// lava_viggy_actions_total{action}, lava_viggy_retries_total{result} and
// lava_viggy_pass_duration_seconds.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.JS == nil {
		return nil, errors.New("viggy: no JetStream")
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Backoff.Base <= 0 {
		cfg.Backoff = DefaultBackoff()
	}
	if cfg.Backoff.Max < cfg.Backoff.Base {
		cfg.Backoff.Max = cfg.Backoff.Base
	}
	if cfg.DefaultInterval <= 0 {
		cfg.DefaultInterval = DefaultInterval
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// The bucket is declared with the rest of the topology (bus.EnsureTopology).
	kv, err := cfg.JS.KeyValue(ctx, Bucket)
	if err != nil {
		return nil, fmt.Errorf("viggy: kv bucket %s (create it with bus.EnsureTopology): %w", Bucket, err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, kv: kv, pub: bus.NewPublisher(cfg.JS), metrics: m}, nil
}

// Run consumes ResourceObserved (LAVA_RESOURCES) and Planned, Applied, Failed and
// DriftScanned (LAVA_PHASES) with the durable consumer "viggy", and runs the scheduler of
// retries and escalations, until ctx is cancelled.
func (s *Service) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return pipeline.Consumer{JS: s.cfg.JS, Service: bus.ServiceViggy, Resource: true, Concurrency: s.cfg.Concurrency,
			Logger: s.cfg.Logger, Metrics: s.cfg.BusMetrics, Publisher: s.pub,
		}.Consume(gctx, s.Handle, bus.StreamResources, bus.StreamPhases)
	})
	g.Go(func() error { return s.schedule(gctx) })
	return g.Wait()
}

// Handle handles one event: ResourceObserved keeps the policy, labels, interval and
// suspension (a suspended resource gets no pass, retry or escalation);
// Planned with awaiting_approval records the held plan id; Applied clears a scheduled retry;
// DriftScanned and Failed (not viggy's own) run a pass. Events of an older generation than
// the newest seen are acked unchanged. m names a resource (the consumer's envelope guard,
// pipeline.Consumer.Resource, admits no other).
func (s *Service) Handle(ctx context.Context, m *bus.Message) error {
	res := m.Envelope.GetResource()
	key := bus.ResourceKey(res.GetNamespace(), res.GetName())
	gen := m.Envelope.GetGeneration()
	fresh := func(cur *Record) *Record {
		if cur == nil || cur.UID != res.GetUid() {
			return &Record{Namespace: res.GetNamespace(), Name: res.GetName(), UID: res.GetUid()}
		}
		return cur
	}
	var err error
	switch ev := m.Event.(type) {
	case *lavav1.ResourceObserved:
		_, err = update(ctx, s.kv, key, func(cur *Record) (*Record, error) {
			r := fresh(cur)
			if gen < r.Generation {
				return nil, errSkip
			}
			if gen > r.Generation {
				r.Retry, r.Escalation, r.HeldPlanID, r.LockWaits = nil, nil, "", 0
			}
			r.Generation = gen
			r.Policy = nil
			if ev.GetRemediation() != nil {
				b, err := proto.Marshal(ev.GetRemediation())
				if err != nil {
					return nil, fmt.Errorf("viggy: encode policy: %w", err)
				}
				r.Policy = b
			}
			r.Labels = ev.GetLabels()
			r.Interval = ev.GetSpec().GetDriftInterval().AsDuration()
			r.Suspended = ev.GetSpec().GetSuspend()
			if r.Suspended {
				// Suspension stops acting: nothing scheduled survives it (resume is a new
				// generation with its own pass).
				r.Retry, r.Escalation = nil, nil
			}
			return r, nil
		})
	case *lavav1.Planned:
		if !ev.GetAwaitingApproval() {
			return nil
		}
		_, err = update(ctx, s.kv, key, func(cur *Record) (*Record, error) {
			r := fresh(cur)
			if gen < r.Generation || r.HeldPlanID == ev.GetPlanId() {
				return nil, errSkip
			}
			r.Generation = max(r.Generation, gen)
			r.HeldPlanID = ev.GetPlanId()
			return r, nil
		})
	case *lavav1.Applied:
		_, err = update(ctx, s.kv, key, func(cur *Record) (*Record, error) {
			r := fresh(cur)
			if gen < r.Generation || (r.Retry == nil && r.HeldPlanID == "" && r.LockWaits == 0) {
				return nil, errSkip
			}
			r.Generation = max(r.Generation, gen)
			r.Retry, r.HeldPlanID, r.LockWaits = nil, "", 0
			return r, nil
		})
	case *lavav1.DriftScanned:
		return s.pass(ctx, key, m.Envelope, &driftPass{ev: ev})
	case *lavav1.Failed:
		if m.Envelope.GetSource() == bus.ServiceViggy {
			return nil
		}
		return s.pass(ctx, key, m.Envelope, &failurePass{ev: ev})
	default:
		return nil
	}
	return err
}

// passKind is what differs between a drift pass and a failure pass.
type passKind interface {
	// diff returns the Diff beat message.
	diff() string
	// severity is the Classify beat's severity.
	severity() lavav1.Severity
	// decide picks the action.
	decide(p *passState) (lavav1.RemediationAction, string, error)
	// act acts on the decision and returns the final phase and the Act message.
	act(ctx context.Context, p *passState) (lavav1.Phase, string, error)
	// tick returns the Tick message.
	tick(p *passState) string
}

// passState is shared by the beats of one pass.
type passState struct {
	s       *Service
	key     string
	cause   *lavav1.Envelope
	rec     *Record
	policy  *lavav1.RemediationPolicy
	sev     lavav1.Severity
	action  lavav1.RemediationAction
	phase   lavav1.Phase
	requeue time.Duration
	tier    int32
	planID  string
	// commands are published right after TickReported, so the watcher folds the pass's phase
	// (Reconverging, Drifted) before the applier's answer (Planned, Applied) can arrive.
	commands []bus.Event
}

// pass runs the seven beats for one event and publishes TickReported.
func (s *Service) pass(ctx context.Context, key string, cause *lavav1.Envelope, k passKind) error {
	p := &passState{s: s, key: key, cause: cause, tier: -1, phase: lavav1.Phase_PHASE_FAILED}
	// A stale event (an older generation than the newest seen) gets no pass.
	rec, _, err := load(ctx, s.kv, key)
	if err != nil {
		return err
	}
	if rec != nil && rec.UID == cause.GetResource().GetUid() && cause.GetGeneration() < rec.Generation {
		s.cfg.Logger.Debug("viggy: stale event ignored", "event_id", cause.GetEventId(), "generation", cause.GetGeneration())
		return nil
	}
	if rec != nil && rec.UID == cause.GetResource().GetUid() && rec.Suspended {
		s.cfg.Logger.Info("viggy: suspended resource: no pass", "event_id", cause.GetEventId(), "generation", cause.GetGeneration())
		return nil
	}
	res := RunPass(ctx, p.beats(k), s.cfg.Now)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if res.Failed {
		p.phase = lavav1.Phase_PHASE_FAILED
	}
	return s.report(ctx, p, res)
}

// beats are the beats of pass p for an event of kind k: Observe, Attest and the metrics of Act
// are shared; k diffs, classifies, decides, acts and ticks.
func (p *passState) beats(k passKind) Beats {
	return Beats{
		Observe: p.observe,
		Diff:    func(context.Context) (string, error) { return k.diff(), nil },
		Classify: func(context.Context) (string, error) {
			p.sev = k.severity()
			return pipeline.SeverityName(p.sev, "clean"), nil
		},
		Decide: func(context.Context) (string, error) {
			a, msg, err := k.decide(p)
			if err != nil {
				return "", err
			}
			p.action = a
			return msg, nil
		},
		Act: func(ctx context.Context) (string, error) {
			phase, msg, err := k.act(ctx, p)
			if err != nil {
				return "", err
			}
			p.phase = phase
			p.s.metrics.actions.WithLabelValues(pipeline.ActionName(p.action)).Inc()
			return msg, nil
		},
		Attest: p.attest,
		Tick:   func(context.Context) (string, error) { return k.tick(p), nil },
	}
}

// observe is the Observe beat: it loads the resource's record (a new one for a new uid), its
// policy and its requeue interval (the policy's, else Config.DefaultInterval).
func (p *passState) observe(ctx context.Context) (string, error) {
	s, cause := p.s, p.cause
	rec, _, err := load(ctx, s.kv, p.key)
	if err != nil {
		return "", err
	}
	if rec == nil || rec.UID != cause.GetResource().GetUid() {
		rec = &Record{Namespace: cause.GetResource().GetNamespace(), Name: cause.GetResource().GetName(),
			UID: cause.GetResource().GetUid()}
	}
	p.rec, p.policy = rec, rec.policy()
	p.requeue = rec.Interval
	if p.requeue <= 0 {
		p.requeue = s.cfg.DefaultInterval
	}
	return fmt.Sprintf("generation %d, policy %s", cause.GetGeneration(),
		SnakeOrigin(p.policy.GetOrigin())), nil
}

// attest is the Attest beat: it records the pass's event, severity, action and phase in the
// resource's record (the receipt is attest's).
func (p *passState) attest(ctx context.Context) (string, error) {
	_, err := update(ctx, p.s.kv, p.key, func(cur *Record) (*Record, error) {
		r := cur
		if r == nil || r.UID != p.rec.UID {
			r = &Record{Namespace: p.rec.Namespace, Name: p.rec.Name, UID: p.rec.UID, Generation: p.rec.Generation}
		}
		r.LastEventID, r.LastSeverity, r.LastAction, r.LastPhase = p.cause.GetEventId(), int32(p.sev), int32(p.action), int32(p.phase)
		return r, nil
	})
	if err != nil {
		return "", err
	}
	return "decision recorded; receipt by attest", nil
}

// report publishes TickReported for pass p with result res and then, unless the pass failed,
// its commands; it counts and logs the pass.
func (s *Service) report(ctx context.Context, p *passState, res PassResult) error {
	cause := p.cause
	tr := &lavav1.TickReported{Beats: res.Beats, FinalPhase: p.phase, StartedAt: timestamppb.New(res.Started),
		EndedAt: timestamppb.New(res.Ended)}
	if res.Decided {
		tr.Decision = &lavav1.Decision{Action: p.action, Severity: p.sev, RequeueAfter: durationpb.New(p.requeue),
			EscalationTier: p.tier, PlanId: p.planID}
	}
	tr.Envelope = s.envelope(cause, "lava.v1.TickReported", eventid.CauseTrigger(cause.GetEventId()), cause.GetCorrelationId())
	if _, err := s.pub.PublishEvent(ctx, tr); err != nil {
		return fmt.Errorf("viggy: %w", err)
	}
	if !res.Failed {
		// A failure to publish naks the event: the pass runs again, and the same event ids make
		// JetStream store TickReported and the commands once.
		for _, cmd := range p.commands {
			if _, err := s.pub.PublishEvent(ctx, cmd); err != nil {
				return fmt.Errorf("viggy: %w", err)
			}
		}
	}
	s.metrics.passes.WithLabelValues(phaseLabel(p.phase)).Inc()
	s.metrics.duration.Observe(res.Ended.Sub(res.Started).Seconds())
	s.cfg.Logger.Info("viggy: pass", "resource", cause.GetResource().GetNamespace()+"/"+cause.GetResource().GetName(),
		"generation", cause.GetGeneration(), "event_id", cause.GetEventId(), "severity", pipeline.SeverityName(p.sev, "clean"),
		"action", pipeline.ActionName(p.action), "final_phase", phaseLabel(p.phase))
	return nil
}

// envelope is an envelope about cause's resource and generation from viggy: event_id from
// (uid, generation, typ, trigger); correlation "" means the event's own id.
func (s *Service) envelope(cause *lavav1.Envelope, typ, trigger, correlation string) *lavav1.Envelope {
	res := cause.GetResource()
	id := eventid.ID(res.GetUid(), cause.GetGeneration(), typ, trigger)
	if correlation == "" {
		correlation = id
	}
	return &lavav1.Envelope{EventId: id, OccurredAt: timestamppb.New(s.cfg.Now().UTC()), Source: bus.ServiceViggy,
		Resource:   &lavav1.ResourceRef{Namespace: res.GetNamespace(), Name: res.GetName(), Uid: res.GetUid()},
		Generation: cause.GetGeneration(), CorrelationId: correlation, Trigger: trigger}
}

// SnakeOrigin names a policy origin: "default", "inline", "reference".
func SnakeOrigin(o lavav1.PolicyOrigin) string {
	switch o {
	case lavav1.PolicyOrigin_POLICY_ORIGIN_INLINE:
		return "inline"
	case lavav1.PolicyOrigin_POLICY_ORIGIN_REFERENCE:
		return "reference"
	}
	return "default"
}

// driftPass is a pass over a DriftScanned.
type driftPass struct{ ev *lavav1.DriftScanned }

func (d *driftPass) diff() string { return fmt.Sprintf("%d drifted field(s)", len(d.ev.GetFindings())) }

func (d *driftPass) severity() lavav1.Severity {
	return max(MaxSeverity(d.ev.GetFindings()), d.ev.GetMaxSeverity())
}

func (d *driftPass) decide(p *passState) (lavav1.RemediationAction, string, error) {
	if p.sev == lavav1.Severity_SEVERITY_UNSPECIFIED {
		return lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP, "clean", nil
	}
	a := ActionFor(p.policy, p.sev)
	if a == lavav1.RemediationAction_REMEDIATION_ACTION_ESCALATE && len(p.policy.GetEscalationTiers()) == 0 {
		return a, "", pipeline.ErrNoLadder
	}
	if a == lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL {
		p.planID = p.rec.HeldPlanID
	}
	return a, pipeline.ActionName(a), nil
}

func (d *driftPass) act(ctx context.Context, p *passState) (lavav1.Phase, string, error) {
	s, cause := p.s, p.cause
	n := len(d.ev.GetFindings())
	if p.sev == lavav1.Severity_SEVERITY_UNSPECIFIED {
		// Clean: any escalation ends.
		if p.rec.Escalation != nil {
			if _, err := update(ctx, s.kv, p.key, func(cur *Record) (*Record, error) {
				if cur == nil || cur.Escalation == nil {
					return nil, errSkip
				}
				cur.Escalation = nil
				return cur, nil
			}); err != nil {
				return 0, "", err
			}
		}
		return lavav1.Phase_PHASE_APPLIED, "clean; converged", nil
	}
	switch p.action {
	case lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP:
		return lavav1.Phase_PHASE_DRIFTED, "recorded", nil
	case lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT, lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL:
		hold := p.action == lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL
		cmd := &lavav1.ReapplyRequested{Reason: "DriftAutoCorrect", Severity: p.sev, DriftEventId: cause.GetEventId(),
			RequireApproval: hold}
		if hold {
			cmd.Reason = "DriftRequireApproval"
		}
		cmd.Envelope = s.envelope(cause, "lava.v1.ReapplyRequested", eventid.CauseTrigger(cause.GetEventId()), "")
		if _, err := bus.SubjectFor(cmd); err != nil {
			return 0, "", err
		}
		p.commands = append(p.commands, cmd)
		if hold {
			return lavav1.Phase_PHASE_DRIFTED, "corrective plan requested; awaiting approval (spec.approvePlan)", nil
		}
		return lavav1.Phase_PHASE_RECONVERGING, "auto-correct enqueued", nil
	case lavav1.RemediationAction_REMEDIATION_ACTION_ESCALATE:
		if esc := p.rec.Escalation; esc != nil && esc.Generation == cause.GetGeneration() {
			p.tier = int32(esc.Tier)
			return lavav1.Phase_PHASE_DRIFTED, fmt.Sprintf("escalation running (tier %d notified)", esc.Tier), nil
		}
		esc := &Escalation{Tier: 0, Next: s.cfg.Now().UTC().Add(TierWait(p.policy, 0)), Severity: int32(p.sev), Fields: n,
			DriftEventID: cause.GetEventId(), TerraformJSONDigest: d.ev.GetTerraformJsonDigest(), Generation: cause.GetGeneration()}
		if err := s.raiseDrift(ctx, p.rec, p.policy, cause, esc, p.action, 0); err != nil {
			return 0, "", err
		}
		if _, err := update(ctx, s.kv, p.key, func(cur *Record) (*Record, error) {
			if cur == nil {
				cur = &Record{Namespace: p.rec.Namespace, Name: p.rec.Name, UID: p.rec.UID, Generation: p.rec.Generation}
			}
			cur.Escalation = esc
			return cur, nil
		}); err != nil {
			return 0, "", err
		}
		p.tier = 0
		return lavav1.Phase_PHASE_DRIFTED, "escalation notified (tier 0)", nil
	}
	// Alert (and anything unknown): the anomaly service raises the DriftDetected anomaly from
	// the same DriftScanned; viggy publishing it too would reach a plain subscriber twice.
	return lavav1.Phase_PHASE_DRIFTED, "alert (the anomaly service raises DriftDetected)", nil
}

func (d *driftPass) tick(p *passState) string { return "next scan in " + p.requeue.String() }

// failurePass is a pass over a Failed.
type failurePass struct {
	ev    *lavav1.Failed
	delay time.Duration
	stall bool
	// wait is set for a Failed with reason Locked: the attempt is retried, not counted.
	wait bool
}

func (f *failurePass) diff() string {
	return fmt.Sprintf("stage %s failed: %s (attempt %d)", stageWord(f.ev.GetStage()), f.ev.GetReason(), max(f.ev.GetAttempt(), 1))
}

func (f *failurePass) severity() lavav1.Severity {
	if f.ev.GetStage() == lavav1.Stage_STAGE_SYNTH {
		return lavav1.Severity_SEVERITY_FUNCTIONAL
	}
	return lavav1.Severity_SEVERITY_CRITICAL
}

func (f *failurePass) decide(p *passState) (lavav1.RemediationAction, string, error) {
	attempt := int(max(f.ev.GetAttempt(), 1))
	switch {
	case !f.ev.GetRetryable():
		return lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP, "not retryable: waits for a new generation", nil
	case f.ev.GetReason() == v1alpha1.ReasonLocked:
		// A lock held by a live holder is a wait: a dead holder's lock is taken over at once
		// (its lease is gone), so this one is released or taken over eventually, and the
		// attempt budget is kept for real failures.
		f.wait = true
		f.delay = p.s.cfg.Backoff.Delay(p.rec.LockWaits + 1)
		p.requeue = f.delay
		return lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT, fmt.Sprintf("state locked (wait %d): retry attempt %d in %s",
			p.rec.LockWaits+1, attempt, f.delay.Round(time.Millisecond)), nil
	case attempt >= p.s.cfg.MaxAttempts:
		f.stall = true
		return lavav1.RemediationAction_REMEDIATION_ACTION_ALERT, fmt.Sprintf("stall: %d attempts failed", attempt), nil
	}
	f.delay = p.s.cfg.Backoff.Delay(attempt)
	p.requeue = f.delay
	return lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT, fmt.Sprintf("retry as attempt %d in %s", attempt+1, f.delay.Round(time.Millisecond)), nil
}

func (f *failurePass) act(ctx context.Context, p *passState) (lavav1.Phase, string, error) {
	s, cause := p.s, p.cause
	switch {
	case !f.ev.GetRetryable():
		return lavav1.Phase_PHASE_FAILED, "recorded", nil
	case f.stall:
		msg := fmt.Sprintf("gave up after %d attempts of stage %s: %s: %s", max(f.ev.GetAttempt(), 1), stageWord(f.ev.GetStage()),
			f.ev.GetReason(), f.ev.GetMessage())
		stalled := &lavav1.Failed{Stage: f.ev.GetStage(), Reason: v1alpha1.ReasonRetriesExhausted, Message: msg, Retryable: false,
			Attempt: f.ev.GetAttempt(), PlanId: f.ev.GetPlanId()}
		stalled.Envelope = s.envelope(cause, "lava.v1.Failed", eventid.CauseTrigger(cause.GetEventId()), cause.GetCorrelationId())
		// The anomaly service raises the Stalled anomaly from this Failed (reason
		// RetriesExhausted).
		if _, err := s.pub.PublishEvent(ctx, stalled); err != nil {
			return 0, "", fmt.Errorf("viggy: %w", err)
		}
		s.metrics.retries.WithLabelValues("stalled").Inc()
		return lavav1.Phase_PHASE_FAILED, "stalled: " + v1alpha1.ReasonRetriesExhausted, nil
	}
	retry := &Retry{Stage: int32(f.ev.GetStage()), Attempt: max(f.ev.GetAttempt(), 1) + 1, Reason: f.ev.GetReason(),
		FailedEventID: cause.GetEventId(), PlanID: f.ev.GetPlanId(), Generation: cause.GetGeneration(),
		Due: s.cfg.Now().UTC().Add(f.delay)}
	if f.wait {
		retry.Attempt, retry.LockWait = max(f.ev.GetAttempt(), 1), true
	}
	if _, err := update(ctx, s.kv, p.key, func(cur *Record) (*Record, error) {
		if cur == nil || cur.UID != cause.GetResource().GetUid() {
			cur = &Record{Namespace: p.rec.Namespace, Name: p.rec.Name, UID: p.rec.UID}
		}
		if cur.Generation > cause.GetGeneration() {
			return nil, errSkip
		}
		cur.Generation = cause.GetGeneration()
		cur.Retry = retry
		if f.wait {
			cur.LockWaits++
		}
		return cur, nil
	}); err != nil {
		return 0, "", err
	}
	s.metrics.retries.WithLabelValues("scheduled").Inc()
	return lavav1.Phase_PHASE_FAILED, fmt.Sprintf("retry %d of stage %s scheduled at %s", retry.Attempt, stageWord(f.ev.GetStage()),
		retry.Due.Format(time.RFC3339)), nil
}

func (f *failurePass) tick(p *passState) string {
	switch {
	case !f.ev.GetRetryable():
		return "no retry"
	case f.stall:
		return "stalled"
	case f.wait:
		return "lock wait; retry in " + f.delay.Round(time.Millisecond).String()
	}
	return "retry in " + f.delay.Round(time.Millisecond).String()
}

func stageWord(s lavav1.Stage) string {
	if t, err := bus.StageToken(s); err == nil {
		return t
	}
	return "unknown"
}

// raiseDrift publishes the DriftDetected anomaly of escalation tier tier (metadata
// escalation_tier and escalation_team, which the anomaly service's Alertmanager sink turns
// into the labels tier and team) for esc's drift. Only viggy knows the tiers; the
// anomaly service routes each tier as its own alert.
func (s *Service) raiseDrift(ctx context.Context, rec *Record, policy *lavav1.RemediationPolicy, cause *lavav1.Envelope, esc *Escalation,
	action lavav1.RemediationAction, tier int) error {
	md := map[string]string{"drifted_fields": strconv.Itoa(esc.Fields), "drift_event_id": esc.DriftEventID,
		"terraform_json_digest": esc.TerraformJSONDigest, "action": pipeline.ActionName(action)}
	md["escalation_tier"] = strconv.Itoa(tier)
	md["escalation_team"] = tierTeam(policy, tier)
	count := int64(tier) + 1
	an := s.anomaly(rec, cause, lavav1.AnomalyKind_ANOMALY_KIND_DRIFT_DETECTED, lavav1.Severity(esc.Severity),
		fmt.Sprintf("drift detected: %d field(s)", esc.Fields), md, esc.TerraformJSONDigest, action, count)
	if _, err := s.pub.PublishEvent(ctx, an); err != nil {
		return fmt.Errorf("viggy: %w", err)
	}
	return nil
}

// tierTeam is escalation tier i's team label ("" when there is no such tier).
func tierTeam(p *lavav1.RemediationPolicy, i int) string {
	tiers := p.GetEscalationTiers()
	if i < 0 || i >= len(tiers) {
		return ""
	}
	return tiers[i].GetTeam()
}

// anomaly builds an AnomalyDetected about the cause's resource. count enters the event id
// (trigger "anomaly:<fingerprint>:<count>"), so a repeat within the stream's duplicate
// window is stored once.
func (s *Service) anomaly(rec *Record, cause *lavav1.Envelope, kind lavav1.AnomalyKind, sev lavav1.Severity, msg string,
	md map[string]string, sourceDigest string, action lavav1.RemediationAction, count int64) *lavav1.AnomalyDetected {
	res := cause.GetResource()
	fp := pipeline.Fingerprint(kind, "", res.GetUid(), sev, sourceDigest)
	now := timestamppb.New(s.cfg.Now().UTC())
	for k, v := range md {
		if v == "" {
			delete(md, k)
		}
	}
	return &lavav1.AnomalyDetected{
		Envelope: s.envelope(cause, "lava.v1.AnomalyDetected", eventid.AnomalyTrigger(fp, count), ""),
		Kind:     kind, Severity: sev, Source: &lavav1.ResourceRef{Namespace: res.GetNamespace(), Name: res.GetName(), Uid: res.GetUid()},
		Cluster: s.cfg.Cluster, Message: msg, Metadata: md, Fingerprint: fp, Count: 1, FirstSeen: now, LastSeen: now,
		Action: action, Labels: rec.Labels,
	}
}

// schedule watches the bucket and publishes due retries and escalation tiers.
func (s *Service) schedule(ctx context.Context) error {
	w, err := s.kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("viggy: watch %s: %w", Bucket, err)
	}
	defer func() { _ = w.Stop() }()
	recs := map[string]*Record{}
	var mu sync.Mutex
	tick := time.NewTicker(s.cfg.Tick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case kve, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil // the watch ends with ctx, which select may see second
				}
				return errors.New("viggy: watch ended")
			}
			if kve == nil {
				continue
			}
			mu.Lock()
			if kve.Operation() != jetstream.KeyValuePut {
				delete(recs, kve.Key())
			} else {
				r := &Record{}
				if json.Unmarshal(kve.Value(), r) == nil && (r.Retry != nil || r.Escalation != nil) {
					recs[kve.Key()] = r
				} else {
					delete(recs, kve.Key())
				}
			}
			mu.Unlock()
		case <-tick.C:
			now := s.cfg.Now().UTC()
			mu.Lock()
			var due []string
			for key, r := range recs {
				if (r.Retry != nil && !now.Before(r.Retry.Due)) || (r.Escalation != nil && !r.Escalation.Next.IsZero() && !now.Before(r.Escalation.Next)) {
					due = append(due, key)
				}
			}
			mu.Unlock()
			for _, key := range due {
				if err := s.fire(ctx, key, now); err != nil && ctx.Err() == nil {
					s.cfg.Logger.Warn("viggy: scheduled command failed; retrying", "key", key, "error", err)
				}
			}
		}
	}
}

// fire publishes what is due for one record: its RetryRequested, its next escalation tier.
// Publishing before clearing, with deterministic event ids, makes a crash or a second replica
// harmless (JetStream de-duplicates).
func (s *Service) fire(ctx context.Context, key string, now time.Time) error {
	rec, _, err := load(ctx, s.kv, key)
	if err != nil || rec == nil {
		return err
	}
	if r := rec.Retry; r != nil && !now.Before(r.Due) {
		stage := lavav1.Stage(r.Stage)
		tok, err := bus.StageToken(stage)
		if err != nil {
			return err
		}
		cause := &lavav1.Envelope{EventId: r.FailedEventID, Generation: r.Generation,
			Resource: &lavav1.ResourceRef{Namespace: rec.Namespace, Name: rec.Name, Uid: rec.UID}}
		cmd := &lavav1.RetryRequested{Target: stage, Attempt: r.Attempt, Reason: r.Reason, NotBefore: timestamppb.New(r.Due),
			FailedEventId: r.FailedEventID, PlanId: r.PlanID}
		trigger := eventid.RetryTrigger(tok, int(r.Attempt))
		if r.LockWait {
			trigger = eventid.LockWaitTrigger(tok, r.FailedEventID)
		}
		cmd.Envelope = s.envelope(cause, "lava.v1.RetryRequested", trigger, "")
		if _, err := s.pub.PublishEvent(ctx, cmd); err != nil {
			return fmt.Errorf("viggy: %w", err)
		}
		if _, err := update(ctx, s.kv, key, func(cur *Record) (*Record, error) {
			if cur == nil || cur.Retry == nil || cur.Retry.FailedEventID != r.FailedEventID {
				return nil, errSkip
			}
			cur.Retry = nil
			return cur, nil
		}); err != nil {
			return err
		}
		s.metrics.retries.WithLabelValues("published").Inc()
		s.cfg.Logger.Info("viggy: retry published", "resource", rec.Namespace+"/"+rec.Name, "stage", tok, "attempt", r.Attempt)
	}
	if e := rec.Escalation; e != nil && !e.Next.IsZero() && !now.Before(e.Next) {
		policy := rec.policy()
		next := e.Tier + 1
		if next >= len(policy.GetEscalationTiers()) {
			_, err := update(ctx, s.kv, key, func(cur *Record) (*Record, error) {
				if cur == nil || cur.Escalation == nil || cur.Escalation.DriftEventID != e.DriftEventID {
					return nil, errSkip
				}
				cur.Escalation.Next = time.Time{} // the last tier was notified
				return cur, nil
			})
			return err
		}
		cause := &lavav1.Envelope{EventId: e.DriftEventID, Generation: e.Generation,
			Resource: &lavav1.ResourceRef{Namespace: rec.Namespace, Name: rec.Name, Uid: rec.UID}}
		if err := s.raiseDrift(ctx, rec, policy, cause, e, lavav1.RemediationAction_REMEDIATION_ACTION_ESCALATE, next); err != nil {
			return err
		}
		_, err := update(ctx, s.kv, key, func(cur *Record) (*Record, error) {
			if cur == nil || cur.Escalation == nil || cur.Escalation.DriftEventID != e.DriftEventID || cur.Escalation.Tier >= next {
				return nil, errSkip
			}
			cur.Escalation.Tier = next
			cur.Escalation.Next = now.Add(TierWait(policy, next))
			return cur, nil
		})
		return err
	}
	return nil
}
