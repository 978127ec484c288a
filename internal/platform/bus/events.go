package bus

import (
	"fmt"
	"strings"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// SnakeCase turns a CamelCase message name or an UPPER_SNAKE enum name into a subject word:
// "DriftScanned" -> "drift_scanned", "APPLY_FAILURE" -> "apply_failure".
func SnakeCase(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			if i > 0 && s[i-1] >= 'a' && s[i-1] <= 'z' {
				b.WriteByte('_')
			}
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// StageToken is the LAVA_COMMANDS stage token of a stage: "synth", "plan", "apply" or
// "destroy". STAGE_UNSPECIFIED is an error.
func StageToken(s lavav1.Stage) (string, error) {
	switch s {
	case lavav1.Stage_STAGE_SYNTH:
		return StageSynth, nil
	case lavav1.Stage_STAGE_PLAN:
		return StagePlan, nil
	case lavav1.Stage_STAGE_APPLY:
		return StageApply, nil
	case lavav1.Stage_STAGE_DESTROY:
		return StageDestroy, nil
	}
	return "", fmt.Errorf("%w: no stage token for %v", ErrInvalidSubject, s)
}

// SeverityToken is the anomaly subject's severity token: "cosmetic", "functional" or
// "critical". SEVERITY_UNSPECIFIED is an error.
func SeverityToken(s lavav1.Severity) (string, error) {
	if s == lavav1.Severity_SEVERITY_UNSPECIFIED {
		return "", fmt.Errorf("%w: anomaly without severity", ErrInvalidSubject)
	}
	name, ok := lavav1.Severity_name[int32(s)]
	if !ok {
		return "", fmt.Errorf("%w: unknown severity %d", ErrInvalidSubject, s)
	}
	return SnakeCase(strings.TrimPrefix(name, "SEVERITY_")), nil
}

// AnomalyKindToken is the anomaly subject's kind token: the enum name without its prefix in
// snake case ("apply_failure"), or for ANOMALY_KIND_CUSTOM the extension kind, which must
// already be a lowercase snake-case word.
func AnomalyKindToken(k lavav1.AnomalyKind, extension string) (string, error) {
	if k == lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM {
		if !isWord(extension) {
			return "", fmt.Errorf("%w: extension kind %q is not lowercase snake case", ErrInvalidSubject, extension)
		}
		return extension, nil
	}
	name, ok := lavav1.AnomalyKind_name[int32(k)]
	if !ok || k == lavav1.AnomalyKind_ANOMALY_KIND_UNSPECIFIED {
		return "", fmt.Errorf("%w: anomaly kind %v", ErrInvalidSubject, k)
	}
	return SnakeCase(strings.TrimPrefix(name, "ANOMALY_KIND_")), nil
}

// SubjectFor is the subject ev is published on (docs/events.md, "Subject layouts"), from its type and envelope:
//
//	ResourceObserved, DeletionRequested     lava.v1.resource.<ns>.<name>.observed|deletion_requested
//	Synthesized ... ReceiptAppended         lava.v1.phase.<ns>.<name>.<snake case of the type>
//	ReapplyRequested                        lava.v1.command.plan.<ns>.<name>.reapply
//	RetryRequested                          lava.v1.command.<target stage>.<ns>.<name>.retry
//	AnomalyDetected                         lava.anomaly.<severity>.<kind>
//
// It fails for an event without envelope.resource (except anomalies) or with an unspecified
// stage, severity or kind.
func SubjectFor(ev Event) (string, error) {
	res := ev.GetEnvelope().GetResource()
	needRes := func() error {
		if res.GetNamespace() == "" || res.GetName() == "" {
			return fmt.Errorf("%w: %s without envelope.resource", ErrInvalidSubject, ev.ProtoReflect().Descriptor().FullName())
		}
		return nil
	}
	ns, name := res.GetNamespace(), res.GetName()
	switch e := ev.(type) {
	case *lavav1.AnomalyDetected:
		sev, err := SeverityToken(e.GetSeverity())
		if err != nil {
			return "", err
		}
		kind, err := AnomalyKindToken(e.GetKind(), e.GetExtensionKind())
		if err != nil {
			return "", err
		}
		return AnomalySubject(sev, kind), nil
	case *lavav1.ResourceObserved:
		return ResourceSubject(ns, name, EventObserved), needRes()
	case *lavav1.DeletionRequested:
		return ResourceSubject(ns, name, EventDeletionRequested), needRes()
	case *lavav1.ReapplyRequested:
		return CommandSubject(StagePlan, ns, name, VerbReapply), needRes()
	case *lavav1.RetryRequested:
		stage, err := StageToken(e.GetTarget())
		if err != nil {
			return "", err
		}
		return CommandSubject(stage, ns, name, VerbRetry), needRes()
	}
	return PhaseSubject(ns, name, SnakeCase(string(ev.ProtoReflect().Descriptor().Name()))), needRes()
}
