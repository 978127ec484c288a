package anomaly_test

import (
	"strings"
	"testing"
	"time"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/service/anomaly"
)

func TestFromFailed_kinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stage  lavav1.Stage
		reason string
		kind   anomaly.Kind
		sev    anomaly.Severity
	}{
		{lavav1.Stage_STAGE_SYNTH, "SynthesisFailed", anomaly.KindSynthesisFailure, anomaly.SeverityFunctional},
		{lavav1.Stage_STAGE_SYNTH, "SourceUnsupported", anomaly.KindSynthesisFailure, anomaly.SeverityFunctional},
		{lavav1.Stage_STAGE_SYNTH, "GateRejected", anomaly.KindGateRejected, anomaly.SeverityFunctional},
		{lavav1.Stage_STAGE_PLAN, "PlanFailed", anomaly.KindApplyFailure, anomaly.SeverityCritical},
		{lavav1.Stage_STAGE_APPLY, "ApplyFailed", anomaly.KindApplyFailure, anomaly.SeverityCritical},
		{lavav1.Stage_STAGE_APPLY, "ProviderUnavailable", anomaly.KindApplyFailure, anomaly.SeverityCritical},
		{lavav1.Stage_STAGE_DESTROY, "DestroyFailed", anomaly.KindDestroyFailure, anomaly.SeverityCritical},
		{lavav1.Stage_STAGE_APPLY, "RetriesExhausted", anomaly.KindStalled, anomaly.SeverityCritical},
		{lavav1.Stage_STAGE_PLAN, "PlanSuperseded", "", ""},
		{lavav1.Stage_STAGE_UNSPECIFIED, "Whatever", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.stage.String()+"/"+tt.reason, func(t *testing.T) {
			t.Parallel()
			a, ok := anomaly.FromFailed(&lavav1.Failed{Envelope: env("infra", "vpc"), Stage: tt.stage, Reason: tt.reason, Attempt: 2}, "c1", now)
			if ok != (tt.kind != "") {
				t.Fatalf("ok = %v", ok)
			}
			if !ok {
				return
			}
			if a.Kind != tt.kind || a.Severity != tt.sev {
				t.Errorf("%s/%s, want %s/%s", a.Kind, a.Severity, tt.kind, tt.sev)
			}
			if a.Source != (anomaly.Source{Cluster: "c1", Namespace: "infra", Name: "vpc", UID: testUID}) || a.Generation != 3 {
				t.Errorf("source %+v generation %d", a.Source, a.Generation)
			}
			if a.Metadata["attempt"] != "2" || len(a.Fingerprint) != 64 {
				t.Errorf("metadata %v fingerprint %q", a.Metadata, a.Fingerprint)
			}
		})
	}
}

func TestFromPhaseChanged_stuckStates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		reason string
		kind   anomaly.Kind
		sev    anomaly.Severity
	}{
		{"DependencyNotReady", anomaly.KindDependencyBlocked, anomaly.SeverityFunctional},
		{"DependencyCycle", anomaly.KindDependencyBlocked, anomaly.SeverityFunctional},
		{"RetriesExhausted", anomaly.KindStalled, anomaly.SeverityCritical},
		{"Applied", "", ""},
		{"ApplyFailed", "", ""},
	}
	for _, tt := range tests {
		a, ok := anomaly.FromPhaseChanged(&lavav1.PhaseChanged{Envelope: env("infra", "vpc"), From: lavav1.Phase_PHASE_PENDING,
			To: lavav1.Phase_PHASE_PENDING, Reason: tt.reason, Message: "waiting for infra/db"}, "", now)
		if ok != (tt.kind != "") || a.Kind != tt.kind || a.Severity != tt.sev {
			t.Errorf("%s: %v %s/%s, want %s/%s", tt.reason, ok, a.Kind, a.Severity, tt.kind, tt.sev)
		}
		if ok && a.Metadata["reason"] != tt.reason {
			t.Errorf("%s: metadata %v", tt.reason, a.Metadata)
		}
	}
}

func TestFromDriftScanned_cleanIsNone(t *testing.T) {
	t.Parallel()
	if _, ok := anomaly.FromDriftScanned(&lavav1.DriftScanned{Envelope: env("infra", "vpc")}, "", now); ok {
		t.Fatal("a clean scan is an anomaly")
	}
}

// The fingerprint is stable over what does not identify the anomaly (times, messages, attempt)
// and differs for what does.
func TestFingerprint_stableInputs(t *testing.T) {
	t.Parallel()
	failed := func(mut func(*lavav1.Failed)) string {
		f := &lavav1.Failed{Envelope: env("infra", "vpc"), Stage: lavav1.Stage_STAGE_APPLY, Reason: "ApplyFailed", Message: "x", Attempt: 1}
		mut(f)
		a, _ := anomaly.FromFailed(f, "", now)
		return a.Fingerprint
	}
	base := failed(func(*lavav1.Failed) {})
	same := map[string]func(*lavav1.Failed){
		"message": func(f *lavav1.Failed) { f.Message = "other text at 01:02:03" },
		"attempt": func(f *lavav1.Failed) { f.Attempt = 4 },
		"event":   func(f *lavav1.Failed) { f.Envelope.EventId = "other" },
	}
	for name, mut := range same {
		if got := failed(mut); got != base {
			t.Errorf("%s changes the fingerprint", name)
		}
	}
	a, _ := anomaly.FromFailed(&lavav1.Failed{Envelope: env("infra", "vpc"), Stage: lavav1.Stage_STAGE_APPLY, Reason: "ApplyFailed"}, "", now.Add(time.Hour))
	if a.Fingerprint != base {
		t.Error("time changes the fingerprint")
	}
	differ := map[string]func(*lavav1.Failed){
		"reason": func(f *lavav1.Failed) { f.Reason = "ProviderUnavailable" },
		"stage":  func(f *lavav1.Failed) { f.Stage = lavav1.Stage_STAGE_DESTROY },
		"uid":    func(f *lavav1.Failed) { f.Envelope.Resource.Uid = "another" },
	}
	for name, mut := range differ {
		if got := failed(mut); got == base {
			t.Errorf("%s does not change the fingerprint", name)
		}
	}
}

// The fingerprint is a contract (viggy's escalation anomalies use it too, through
// report.Fingerprint): these vectors must not change.
func TestFingerprint_vectors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind lavav1.AnomalyKind
		sev  lavav1.Severity
		disc string
		want string
	}{
		{lavav1.AnomalyKind_ANOMALY_KIND_DRIFT_DETECTED, function, "abc", "538909d5243ff244eefb74aabe8f04059704cb70c796d2631001cef9b7fb25e6"},
		{lavav1.AnomalyKind_ANOMALY_KIND_STALLED, critical, "", "694987fe2957afba48e297a426cc01cf62b712ae3ec73e3ed2c993ac00692081"},
	}
	for _, tt := range tests {
		if got := anomaly.Fingerprint(tt.kind, "", "uid-1", tt.sev, tt.disc); got != tt.want {
			t.Errorf("Fingerprint(%v) = %s, want %s", tt.kind, got, tt.want)
		}
	}
}

func TestSanitize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		secrets []string
		keep    []string
	}{
		{in: "apply failed: password=hunter2 rejected", secrets: []string{"hunter2"}, keep: []string{"password=(redacted)", "rejected"}},
		{in: `db_password: "s3cr3t value"`, secrets: []string{"s3cr3t"}},
		{in: "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", secrets: []string{"eyJhbGciOiJIUzI1NiJ9"}},
		{in: "fetch https://admin:pa55word@db.internal/x failed", secrets: []string{"pa55word"}, keep: []string{"db.internal"}},
		{in: "key AKIAIOSFODNN7EXAMPLE denied", secrets: []string{"AKIAIOSFODNN7EXAMPLE"}},
		{in: "-----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY-----", secrets: []string{"MIIabc"}},
		{in: "value (redacted) not accepted: inline:3:4", keep: []string{"value (redacted) not accepted: inline:3:4"}},
	}
	for _, tt := range tests {
		got := anomaly.Sanitize(tt.in)
		for _, s := range tt.secrets {
			if strings.Contains(got, s) {
				t.Errorf("Sanitize(%q) = %q keeps %q", tt.in, got, s)
			}
		}
		for _, k := range tt.keep {
			if !strings.Contains(got, k) {
				t.Errorf("Sanitize(%q) = %q lost %q", tt.in, got, k)
			}
		}
	}
	if got := anomaly.Sanitize(strings.Repeat("é", 2000)); len(got) > anomaly.MaxMessageBytes || !strings.HasSuffix(got, "é") {
		t.Errorf("long message cut to %d bytes, suffix %q", len(got), got[len(got)-2:])
	}
}

// No secret value reaches an anomaly built from a failure whose message carries a redacted
// secret and a leaked one.
func TestFromFailed_noSecretInAnomaly(t *testing.T) {
	t.Parallel()
	f := &lavav1.Failed{Envelope: env("infra", "vpc"), Stage: lavav1.Stage_STAGE_APPLY, Reason: "ApplyFailed",
		Message: `Error: invalid value "(redacted)" for master_password; provider said token=tok-ABCDEF123456`}
	a, _ := anomaly.FromFailed(f, "", now)
	if strings.Contains(a.Message, "tok-ABCDEF123456") || !strings.Contains(a.Message, `"(redacted)"`) {
		t.Errorf("message %q", a.Message)
	}
}
