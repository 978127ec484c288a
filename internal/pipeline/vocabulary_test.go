package pipeline_test

import (
	"testing"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
)

func TestEngineNames(t *testing.T) {
	t.Parallel()
	for _, e := range []lavav1.Engine{lavav1.Engine_ENGINE_EMBEDDED, lavav1.Engine_ENGINE_TOFU, lavav1.Engine_ENGINE_TERRAFORM} {
		if got := pipeline.EngineProto(v1alpha1.Engine(pipeline.EngineName(e))); got != e {
			t.Errorf("round trip of %v gives %v", e, got)
		}
	}
	if pipeline.EngineName(lavav1.Engine_ENGINE_UNSPECIFIED) != string(v1alpha1.EngineEmbedded) {
		t.Error("an unspecified engine is not the CRD default, embedded")
	}
	if got := pipeline.EngineProto(""); got != lavav1.Engine_ENGINE_EMBEDDED {
		t.Errorf("an empty spec.engine gives %v, want the CRD default", got)
	}
	if got := pipeline.EngineProto("pulumi"); got != lavav1.Engine_ENGINE_UNSPECIFIED {
		t.Errorf("an unknown engine name gives %v, want ENGINE_UNSPECIFIED (no service runs it)", got)
	}
}

func TestChangeKindsAndSeverities(t *testing.T) {
	t.Parallel()
	for _, a := range []engine.Action{engine.ActionNoOp, engine.ActionCreate, engine.ActionRead, engine.ActionUpdate, engine.ActionReplace, engine.ActionDelete} {
		k := pipeline.ChangeKind(a)
		if k == lavav1.ChangeKind_CHANGE_KIND_UNSPECIFIED {
			t.Errorf("action %q has no change kind", a)
		}
		if word := pipeline.ChangeAction(k); (a == engine.ActionNoOp) != (word == "") {
			t.Errorf("action %q: status word %q", a, word)
		}
	}
	for _, s := range []engine.Severity{engine.SeverityCosmetic, engine.SeverityFunctional, engine.SeverityCritical} {
		if got := pipeline.SeverityName(pipeline.SeverityProto(s), "none"); got != string(s) {
			t.Errorf("severity %q round-trips to %q", s, got)
		}
	}
	if got := pipeline.SeverityName(lavav1.Severity_SEVERITY_UNSPECIFIED, "clean"); got != "clean" {
		t.Errorf("no severity is %q, want the caller's word", got)
	}
}
