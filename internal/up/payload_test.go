package up

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/manifest"
)

// TestRun_observedOverMaxPayload: a manifest under the 1 MiB file limit whose ResourceObserved
// is over the bus's max_payload (the embedded server's default, 1 MiB: 400,000 one-byte list
// binding values, 800 KB of YAML, about 1.2 MB of event) fails its object with the sizes and
// what to do, and the other object of the run is applied. (Before: the publish failed at every
// scan with a log line, and the object stayed Pending, so --once never ended.)
func TestRun_observedOverMaxPayload(t *testing.T) {
	manifests := t.TempDir()
	const head = "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: %s, namespace: demo}\n" +
		"spec:\n  source:\n    inline: |\n      (deflava-architecture notes :resources ((terraform-data \"n\" :input \"x\")))\n"
	big := strings.Replace(head, "%s", "big", 1) + "  listBindings:\n    pad: [" + strings.Repeat("x,", 400_000) + "x]\n"
	if len(big) >= manifest.MaxFileBytes {
		t.Fatalf("the manifest is %d bytes, not under the file limit", len(big))
	}
	for name, doc := range map[string]string{"big.yaml": big, "notes.yaml": strings.Replace(head, "%s", "notes", 1)} {
		if err := os.WriteFile(filepath.Join(manifests, name), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	res, err := Run(t.Context(), Options{Paths: []string{manifests}, StateDir: t.TempDir(), FileRoot: filepath.Join(t.TempDir(), "files"),
		Once: true, Timeout: 2 * time.Minute, Interval: 100 * time.Millisecond, Stdout: &out})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	got := map[string]v1alpha1.LavaArchitecture{}
	for _, o := range res.Objects {
		got[o.Name] = o
	}
	if p := got["notes"].Status.Phase; p != v1alpha1.PhaseApplied {
		t.Errorf("demo/notes is %s, want Applied", p)
	}
	o := got["big"]
	ready := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReady)
	if o.Status.Phase != v1alpha1.PhaseFailed || o.Status.ObservedGeneration != 1 || ready == nil || ready.Reason != v1alpha1.ReasonSpecTooLarge {
		t.Fatalf("demo/big: phase %s, observed generation %d, Ready %+v; want Failed, 1, reason %s",
			o.Status.Phase, o.Status.ObservedGeneration, ready, v1alpha1.ReasonSpecTooLarge)
	}
	var size, over int
	if _, err := fmt.Sscanf(ready.Message, "the ResourceObserved event of this spec is %d bytes, %d bytes over the bus's limit of 1048576 bytes", &size, &over); err != nil ||
		size < 1_100_000 || over != size-1048576 || !strings.Contains(ready.Message, "move the source into a Flux source (spec.sourceRef)") {
		t.Errorf("Ready message %q (%v), want the event's size (about 1.2 MB), how far over and the limit, and what to do", ready.Message, err)
	}
	if !meta.IsStatusConditionTrue(o.Status.Conditions, v1alpha1.ConditionStalled) {
		t.Errorf("demo/big is not Stalled (the same spec fails again): %+v", o.Status.Conditions)
	}
}
