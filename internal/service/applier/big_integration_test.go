//go:build integration

package applier_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/service/applier"
)

// gridSource expands to len(xs)² terraform_data resources.
const gridSource = `(deflava-architecture grid
  :inputs ((:xs ()))
  :resources ((for-each ((i x) (enumerate xs))
                (for-each ((j y) (enumerate xs))
                  (terraform-data "d-{i}-{j}" :input "{x}-{y}")))))
`

func gridSpec(n int, approve string) *lavav1.ArchitectureSpec {
	xs := make([]string, n)
	for i := range xs {
		xs[i] = fmt.Sprint(i)
	}
	return &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: gridSource}},
		ListBindings: map[string]*lavav1.StringList{"xs": {Values: xs}}, Engine: lavav1.Engine_ENGINE_EMBEDDED, ApprovePlan: approve}
}

// TestApplier_bigPlanEventBounded: a plan of 1,600 resources is published with at most
// applier.MaxEventChanges changes in its Planned event and the rest counted; the event stays
// small (the plan artifact holds the changes).
func TestApplier_bigPlanEventBounded(t *testing.T) {
	h := newHarness(t)
	h.startApplier(applierOpts{})
	h.observe("demo", "grid", 1, gridSpec(40, "manual"))
	p := await(h, "demo", "grid", 3*time.Minute, gen[*lavav1.Planned](1))
	if p.GetSummary().GetAdd() != 1600 || len(p.GetChanges()) != applier.MaxEventChanges || p.GetChangesOmitted() != 600 {
		t.Fatalf("Planned: %d to add, %d changes listed, %d omitted; want 1600, %d, 600", p.GetSummary().GetAdd(),
			len(p.GetChanges()), p.GetChangesOmitted(), applier.MaxEventChanges)
	}
	if n := proto.Size(p); n > 128<<10 {
		t.Errorf("Planned is %d bytes, want it well below max_payload", n)
	}
	if p.GetPlanArtifactDigest() == "" {
		t.Error("no plan artifact digest")
	}
	t.Logf("Planned of a 1600-resource plan: %d bytes", proto.Size(p))
}

// TestApplier_hugeExpansionRefused: a source expanding to 40,000 resources is refused by the
// evaluator's resource limit: Failed at synthesis with the source position (inline:LINE:COL)
// and the limit named, nothing planned.
func TestApplier_hugeExpansionRefused(t *testing.T) {
	h := newHarness(t)
	h.startApplier(applierOpts{})
	h.observe("demo", "huge", 1, gridSpec(200, "auto"))
	f := await(h, "demo", "huge", 2*time.Minute, gen[*lavav1.Failed](1))
	if f.GetStage() != lavav1.Stage_STAGE_SYNTH || f.GetRetryable() ||
		!strings.Contains(f.GetMessage(), "more than 10000 resources after loop expansion") ||
		!regexp.MustCompile(`:\d+:\d+: `).MatchString(f.GetMessage()) {
		t.Fatalf("Failed %v %s retryable=%v %q: want a final synthesis failure with line:col naming the limit",
			f.GetStage(), f.GetReason(), f.GetRetryable(), f.GetMessage())
	}
	if p := events[*lavav1.Planned](h, "demo", "huge"); len(p) != 0 {
		t.Fatal("a refused expansion was planned")
	}
	t.Logf("%s: %s", f.GetReason(), f.GetMessage())
}

// TestApplier_malformedSourcesFail: every malformed case (cmd/lava/testdata/malformed, the
// repository's copy of the shared cases) given as an inline source fails at synthesis, not
// retried, with the line and column the case names ("inline:L:C: "), and is never planned;
// the pipeline keeps running (a valid source afterwards applies).
func TestApplier_malformedSourcesFail(t *testing.T) {
	h := newHarness(t)
	h.startApplier(applierOpts{})
	files, err := filepath.Glob("../../../cmd/lava/testdata/malformed/*.tlisp")
	if err != nil || len(files) < 5 {
		t.Fatalf("malformed cases: %v %v", files, err)
	}
	expect := regexp.MustCompile(`expect (\d+):(\d+)`)
	for i, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := expect.FindStringSubmatch(string(src))
		if m == nil {
			t.Fatalf("%s names no `expect L:C`", f)
		}
		name := fmt.Sprintf("malformed-%d", i)
		h.observe("demo", name, 1, &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: string(src)}},
			Engine: lavav1.Engine_ENGINE_EMBEDDED})
		fl := await(h, "demo", name, time.Minute, gen[*lavav1.Failed](1))
		want := "inline:" + m[1] + ":" + m[2] + ": "
		if fl.GetStage() != lavav1.Stage_STAGE_SYNTH || fl.GetRetryable() || !strings.Contains(fl.GetMessage(), want) {
			t.Errorf("%s: Failed %v %s retryable=%v %q, want a final synthesis failure at %q", filepath.Base(f),
				fl.GetStage(), fl.GetReason(), fl.GetRetryable(), fl.GetMessage(), want)
		}
		if p := events[*lavav1.Planned](h, "demo", name); len(p) != 0 {
			t.Errorf("%s was planned", filepath.Base(f))
		}
	}
	src := `(deflava-architecture ok :inputs ((:v "x")) :resources ((terraform-data "d" :input "{v}")))`
	h.observe("demo", "after-malformed", 1, &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
		Engine: lavav1.Engine_ENGINE_EMBEDDED})
	await(h, "demo", "after-malformed", time.Minute, gen[*lavav1.Applied](1))
}

// TestApplier_bigArtifactsGoThrough: an architecture of 200 terraform_data whose inputs add up
// to 9.4 MiB goes through synth and the applier (embedded engine) to Applied and back to
// Destroyed: its Terraform JSON, plan and state body (each over 8 MiB) are artifacts in
// lava-artifacts, and no message on the bus comes near the server's max_payload (1 MiB, the
// nats-server default this test's server runs with): the largest stays under 128 KiB.
func TestApplier_bigArtifactsGoThrough(t *testing.T) {
	h := newHarness(t)
	h.startApplier(applierOpts{})
	const n, blobBytes = 200, 48 << 10
	src := `(deflava-architecture big
  :inputs ((:xs ()))
  :resources ((for-each ((i x) (enumerate xs))
                (terraform-data "d-{i}" :input "{x}-` + strings.Repeat("b", blobBytes) + `"))))
`
	xs := make([]string, n)
	for i := range xs {
		xs[i] = fmt.Sprint(i)
	}
	spec := &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
		ListBindings: map[string]*lavav1.StringList{"xs": {Values: xs}}, Engine: lavav1.Engine_ENGINE_EMBEDDED}
	h.observe("demo", "big", 1, spec)
	a := await(h, "demo", "big", 10*time.Minute, gen[*lavav1.Applied](1))
	p := await(h, "demo", "big", time.Second, gen[*lavav1.Planned](1))
	if a.GetSummary().GetAdd() != n || len(p.GetChanges()) != n {
		t.Fatalf("Applied %d added, Planned lists %d changes; want %d", a.GetSummary().GetAdd(), len(p.GetChanges()), n)
	}
	obs, err := h.js.ObjectStore(t.Context(), bus.ObjectStoreArtifacts)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := h.js.KeyValue(t.Context(), bus.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(t.Context(), "state.demo.big")
	if err != nil {
		t.Fatal(err)
	}
	var rec state.Record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		t.Fatal(err)
	}
	sizes := map[string]uint64{}
	for what, digest := range map[string]string{"Terraform JSON": a.GetArtifactDigest(), "plan": p.GetPlanArtifactDigest(), "state body": rec.Digest} {
		info, err := obs.GetInfo(t.Context(), digest)
		if err != nil {
			t.Fatalf("%s artifact %q: %v", what, digest, err)
		}
		sizes[what] = info.Size
		if info.Size <= 8<<20 {
			t.Errorf("%s artifact is %d bytes, want over 8 MiB (the test must carry big data)", what, info.Size)
		}
	}
	h.deletion("demo", "big", 1, lavav1.DeletionPolicy_DELETION_POLICY_DESTROY, lavav1.Engine_ENGINE_UNSPECIFIED)
	if d := await[*lavav1.Destroyed](h, "demo", "big", 10*time.Minute, nil); d.GetDestroyedCount() != n {
		t.Errorf("destroyed %d, want %d", d.GetDestroyedCount(), n)
	}
	largest, subject := 0, ""
	h.mu.Lock()
	for _, c := range h.msgs {
		if len(c.data) > largest {
			largest, subject = len(c.data), c.subject
		}
	}
	h.mu.Unlock()
	if largest > 128<<10 {
		t.Errorf("the largest message (%s) is %d bytes, want under 128 KiB", subject, largest)
	}
	t.Logf("Terraform JSON %.1f MiB, plan %.1f MiB, state body %.1f MiB; largest message %d bytes (%s)",
		float64(sizes["Terraform JSON"])/(1<<20), float64(sizes["plan"])/(1<<20), float64(sizes["state body"])/(1<<20), largest, subject)
}
