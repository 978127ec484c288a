package bus

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidSubject reports a subject outside the layouts of docs/events.md ("Subject layouts").
var ErrInvalidSubject = errors.New("bus: invalid subject")

// Subject prefixes. Every Lava subject starts with one of these; the tokens after them are
// listed with each builder.
const (
	// PrefixResource starts the LAVA_RESOURCES subjects.
	PrefixResource = "lava.v1.resource."
	// PrefixPhase starts the LAVA_PHASES subjects.
	PrefixPhase = "lava.v1.phase."
	// PrefixCommand starts the LAVA_COMMANDS subjects.
	PrefixCommand = "lava.v1.command."
	// PrefixAnomaly starts the LAVA_ANOMALIES subjects (the public alerting contract, protojson).
	PrefixAnomaly = "lava.anomaly."
	// PrefixReceipt starts the LAVA_RECEIPTS subjects.
	PrefixReceipt = "lava.v1.receipt."
)

// Last tokens of LAVA_RESOURCES subjects.
const (
	// EventObserved is ResourceObserved.
	EventObserved = "observed"
	// EventDeletionRequested is DeletionRequested.
	EventDeletionRequested = "deletion_requested"
)

// Last tokens of LAVA_PHASES subjects: the snake case of the event message's name
// (EventApplied is lava.v1.Applied, ...).
const (
	EventSynthesized  = "synthesized"
	EventPlanned      = "planned"
	EventApplied      = "applied"
	EventFailed       = "failed"
	EventDestroyed    = "destroyed"
	EventDriftScanned = "drift_scanned"
	EventPhaseChanged = "phase_changed"
	EventTickReported = "tick_reported"
	// EventReceiptAppended announces a new receipt chain head (the receipt itself is on
	// [ReceiptSubject]).
	EventReceiptAppended = "receipt_appended"
)

// Stage tokens of LAVA_COMMANDS subjects: the pipeline stage a command targets. StageSynth goes
// to synth; the others go to the applier.
const (
	StageSynth   = "synth"
	StagePlan    = "plan"
	StageApply   = "apply"
	StageDestroy = "destroy"
)

// Verb tokens of LAVA_COMMANDS subjects.
const (
	// VerbReapply is ReapplyRequested.
	VerbReapply = "reapply"
	// VerbRetry is RetryRequested.
	VerbRetry = "retry"
)

// ResourceSubject is "lava.v1.resource.<ns>.<name>.<event>", event one of [EventObserved] and
// [EventDeletionRequested]; ns and name are escaped with [EscapeToken].
func ResourceSubject(namespace, name, event string) string {
	return PrefixResource + EscapeToken(namespace) + "." + EscapeToken(name) + "." + event
}

// PhaseSubject is "lava.v1.phase.<ns>.<name>.<event>", event a lowercase snake-case word such
// as [EventApplied]; ns and name are escaped with [EscapeToken].
func PhaseSubject(namespace, name, event string) string {
	return PrefixPhase + EscapeToken(namespace) + "." + EscapeToken(name) + "." + event
}

// CommandSubject is "lava.v1.command.<stage>.<ns>.<name>.<verb>", stage one of the Stage
// constants and verb one of the Verb constants; ns and name are escaped with [EscapeToken].
func CommandSubject(stage, namespace, name, verb string) string {
	return PrefixCommand + stage + "." + EscapeToken(namespace) + "." + EscapeToken(name) + "." + verb
}

// AnomalySubject is "lava.anomaly.<severity>.<kind>", both lowercase snake case
// ("lava.anomaly.critical.apply_failure"). No resource name appears in it: alert routing keys
// stay low-cardinality.
func AnomalySubject(severity, kind string) string {
	return PrefixAnomaly + severity + "." + kind
}

// ReceiptSubject is "lava.v1.receipt.<ns>.<name>", the subject of a resource's receipt chain
// (lava.v1.Receipt messages, published with [Publisher.PublishMessage]); ns and name are
// escaped with [EscapeToken].
func ReceiptSubject(namespace, name string) string {
	return PrefixReceipt + EscapeToken(namespace) + "." + EscapeToken(name)
}

// SubjectKind names the stream family a subject belongs to.
type SubjectKind string

// Subject kinds.
const (
	KindResource SubjectKind = "resource"
	KindPhase    SubjectKind = "phase"
	KindCommand  SubjectKind = "command"
	KindAnomaly  SubjectKind = "anomaly"
	KindReceipt  SubjectKind = "receipt"
)

// Subject is a parsed Lava subject. Namespace and Name are unescaped (the raw Kubernetes
// values); fields a kind does not have are empty.
type Subject struct {
	// Kind is the stream family.
	Kind SubjectKind
	// Namespace and Name are the resource's (resource, phase, command and receipt subjects).
	Namespace string
	Name      string
	// Event is the last token of resource and phase subjects.
	Event string
	// Stage and Verb are the command tokens.
	Stage, Verb string
	// Severity and AnomalyKind are the anomaly tokens.
	Severity, AnomalyKind string
}

// ResourceOrderKey is the [ConsumeOptions].OrderKey that keeps each resource's messages in
// order: "<namespace>/<name>" of a resource, phase, command or receipt subject; "" for a
// subject that names no resource (anomalies), which therefore share one key.
func ResourceOrderKey(subject string) string {
	s, err := ParseSubject(subject)
	if err != nil || s.Name == "" {
		return ""
	}
	return s.Namespace + "/" + s.Name
}

// ParseSubject parses a literal (wildcard-free) Lava subject and unescapes its names. Fixed
// tokens (event, stage, verb, severity, kind) must be lowercase snake case ([a-z][a-z0-9_]*).
// Errors wrap [ErrInvalidSubject], and [ErrInvalidToken] for a bad escaped name.
func ParseSubject(subject string) (Subject, error) {
	bad := func(why string) (Subject, error) {
		return Subject{}, fmt.Errorf("%w: %q: %s", ErrInvalidSubject, subject, why)
	}
	var (
		rest string
		kind SubjectKind
		want int
	)
	switch {
	case strings.HasPrefix(subject, PrefixResource):
		rest, kind, want = subject[len(PrefixResource):], KindResource, 3
	case strings.HasPrefix(subject, PrefixPhase):
		rest, kind, want = subject[len(PrefixPhase):], KindPhase, 3
	case strings.HasPrefix(subject, PrefixCommand):
		rest, kind, want = subject[len(PrefixCommand):], KindCommand, 4
	case strings.HasPrefix(subject, PrefixAnomaly):
		rest, kind, want = subject[len(PrefixAnomaly):], KindAnomaly, 2
	case strings.HasPrefix(subject, PrefixReceipt):
		rest, kind, want = subject[len(PrefixReceipt):], KindReceipt, 2
	default:
		return bad("unknown prefix")
	}
	toks := strings.Split(rest, ".")
	if len(toks) != want {
		return bad(fmt.Sprintf("%d tokens after the prefix, want %d", len(toks), want))
	}
	s := Subject{Kind: kind}
	var err error
	word := func(t string) bool { return isWord(t) }
	switch kind {
	case KindResource, KindPhase:
		if !word(toks[2]) {
			return bad("event token is not lowercase snake case")
		}
		if kind == KindResource && toks[2] != EventObserved && toks[2] != EventDeletionRequested {
			return bad("resource event is neither observed nor deletion_requested")
		}
		s.Event = toks[2]
		s.Namespace, s.Name, err = unescapePair(toks[0], toks[1])
	case KindCommand:
		if !word(toks[0]) || !word(toks[3]) {
			return bad("stage or verb token is not lowercase snake case")
		}
		s.Stage, s.Verb = toks[0], toks[3]
		s.Namespace, s.Name, err = unescapePair(toks[1], toks[2])
	case KindAnomaly:
		if !word(toks[0]) || !word(toks[1]) {
			return bad("severity or kind token is not lowercase snake case")
		}
		s.Severity, s.AnomalyKind = toks[0], toks[1]
	case KindReceipt:
		s.Namespace, s.Name, err = unescapePair(toks[0], toks[1])
	}
	if err != nil {
		return Subject{}, fmt.Errorf("%w: %q: %w", ErrInvalidSubject, subject, err)
	}
	return s, nil
}
