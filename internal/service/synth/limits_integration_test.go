//go:build integration

package synth_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/gate"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/service/synth"
)

// TestSynth_boundSecretKeysAttack: a tenant's Secret of 30,000 keys bound with secretRef.key
// for one of them. Every value of the Secret was added for redaction before the key was
// chosen, each one compared with all before it: 81.7 s to synthesize one object. Only the
// bound key's value is redacted (counted in synth's log); bound whole, every key is bound and
// redacted, and the object is still synthesized.
func TestSynth_boundSecretKeysAttack(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	const keys = 25000 // 225 KB of values: within engine.MaxSecretBytes
	data := map[string][]byte{}
	for i := range keys {
		data[fmt.Sprintf("k%05d", i)] = []byte(fmt.Sprintf("\x01${\xfb%05d", i))
	}
	if err := env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"}, Data: data}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, env.Client)
	const src = `(deflava-architecture a :inputs ((:k00000 "x")) :resources ((terraform-data "r" :input "{k00000}")))`
	for _, tt := range []struct {
		name, key string
		redacted  int
	}{
		{"one-key", "k00000", 1},
		{"whole", "", keys},
	} {
		o := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tt.name},
			Spec: v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Name: "aws-vpc-network"}}}
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		h.observe(ns, tt.name, string(o.UID), 1, &lavav1.ArchitectureSpec{Source: inline(src),
			BindingsFrom: []*lavav1.BindingsFromRef{{Ref: &lavav1.BindingsFromRef_SecretRef{SecretRef: &lavav1.ObjectKeyRef{Name: "big", Key: tt.key}}}}})
		if syn, failed := h.outcome(ns, tt.name, 1); syn == nil {
			t.Fatalf("%s: Failed %s: %s", tt.name, failed.GetReason(), failed.GetMessage())
		}
		if want := fmt.Sprintf(`"redacted_values":%d`, tt.redacted); !strings.Contains(h.logs.String(), want) {
			t.Errorf("%s: synth's log has no %s:\n%.3000s", tt.name, want, h.logs.String())
		}
	}
}

// TestSynth_secretBytesAttack: Secret bindings whose values total more than
// engine.MaxSecretBytes fail the object (retryable: a smaller Secret fixes it), the message
// giving the sizes and no value, before a redactor is built of them (32 Secrets of 1 MiB of
// control bytes would have taken about 12 GB of synth's memory: their escaped forms, found by
// an eighth trial). Just under the limit renders.
func TestSynth_secretBytesAttack(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	half := strings.Repeat("\x01", engine.MaxSecretBytes/2)
	for _, name := range []string{"a", "b"} {
		if err := env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Data: map[string][]byte{name: []byte(half[:len(half)-8] + name)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
		Data: map[string][]byte{"c": []byte("one more secret value")}}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, env.Client)
	const src = `(deflava-architecture a :inputs ((:a "x") (:b "x")) :resources ((terraform-data "r" :input "{a}")))`
	bind := func(names ...string) []*lavav1.BindingsFromRef {
		var out []*lavav1.BindingsFromRef
		for _, n := range names {
			out = append(out, &lavav1.BindingsFromRef{Ref: &lavav1.BindingsFromRef_SecretRef{SecretRef: &lavav1.ObjectKeyRef{Name: n}}})
		}
		return out
	}
	uid := func(name string) string {
		o := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Name: "aws-vpc-network"}}}
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		return string(o.UID)
	}
	h.observe(ns, "under", uid("under"), 1, &lavav1.ArchitectureSpec{Source: inline(src), BindingsFrom: bind("a", "b")})
	if syn, failed := h.outcome(ns, "under", 1); syn == nil {
		t.Fatalf("just under the limit: Failed %s: %s\n%.4000s", failed.GetReason(), failed.GetMessage(), h.logs.String())
	}
	h.observe(ns, "over", uid("over"), 1, &lavav1.ArchitectureSpec{Source: inline(src), BindingsFrom: bind("a", "b", "c")})
	syn, failed := h.outcome(ns, "over", 1)
	if syn != nil || failed.GetReason() != v1alpha1.ReasonSynthesisFailed || !failed.GetRetryable() ||
		!strings.Contains(failed.GetMessage(), fmt.Sprintf("more than the %d bytes", engine.MaxSecretBytes)) {
		t.Fatalf("over the limit: Synthesized %v, Failed %+v", syn != nil, failed)
	}
	if strings.Contains(failed.GetMessage(), "\x01") || strings.Contains(failed.GetMessage(), "one more secret value") {
		t.Errorf("the failure shows a value: %.200q", failed.GetMessage())
	}
}

// TestSynth_synthesizedOverMaxPayload: the gate's warnings about architecture inputs a closed
// interface does not declare are capped, so 9,000 of them make a Synthesized event of
// kilobytes (one warning each made 1.23 MB, over NATS' max_payload, and the message was
// delivered again to MaxDeliver with no outcome); and a Synthesized event still larger than
// the server's max_payload fails the object, not retried, naming the sizes.
func TestSynth_synthesizedOverMaxPayload(t *testing.T) {
	bindings := map[string]string{"account-id": strings.Repeat("a", 32), "bucket-name": "abc", "zone-id": strings.Repeat("z", 32), "domain": "example.com"}
	source := func(inputs int, name func(int) string) string {
		var b strings.Builder
		b.WriteString(`(deflava-architecture a :inputs ((:account-id "") (:bucket-name "") (:zone-id "") (:domain "")`)
		for i := range inputs {
			fmt.Fprintf(&b, " (:%s \"\")", name(i))
		}
		b.WriteString(`) :resources ((terraform-data "r" :input "x")))`)
		return b.String()
	}
	spec := func(src string) *lavav1.ArchitectureSpec {
		return &lavav1.ArchitectureSpec{Source: inline(src), Gate: "cloudflare-r2-bucket", Bindings: bindings}
	}

	h := newHarness(t, nil)
	h.observe("demo", "many", "uid-many", 1, spec(source(9000, func(i int) string { return fmt.Sprintf("x%d", i) })))
	syn, failed := h.outcome("demo", "many", 1)
	if syn == nil {
		t.Fatalf("Failed %s: %s", failed.GetReason(), failed.GetMessage())
	}
	ws := syn.GetGate().GetWarnings()
	if len(ws) > gate.MaxUndeclaredWarnings+5 || !strings.Contains(strings.Join(ws, "\n"), "… and 8950 more architecture input(s)") {
		t.Errorf("%d gate warnings, want at most %d and one counting the rest:\n%.2000s", len(ws), gate.MaxUndeclaredWarnings+5, strings.Join(ws, "\n"))
	}

	// On a server taking at most 8 KiB a message, 60 inputs of 80-byte names fit in a
	// ResourceObserved and make capped warnings of about 10 KB.
	small := newHarnessOn(t, natstest.Run(t, natstest.Config{MaxPayload: 8 << 10}), func(*synth.Config) {})
	small.observe("demo", "long", "uid-long", 1, spec(source(60, func(i int) string { return fmt.Sprintf("x%02d-%s", i, strings.Repeat("n", 76)) })))
	syn, failed = small.outcome("demo", "long", 1)
	if failed == nil {
		t.Fatalf("Synthesized %d bytes of warnings on a server with a 64 KiB max_payload", len(strings.Join(syn.GetGate().GetWarnings(), "")))
	}
	for _, want := range []string{"more than the bus's maximum message size of 8192 bytes", "its gate verdict holds 52 warning(s) of"} {
		if !strings.Contains(failed.GetMessage(), want) {
			t.Errorf("Failed message %q lacks %q", failed.GetMessage(), want)
		}
	}
	if failed.GetReason() != v1alpha1.ReasonSynthesisFailed || failed.GetRetryable() {
		t.Errorf("Failed %s retryable=%v, want SynthesisFailed, not retryable", failed.GetReason(), failed.GetRetryable())
	}
}

// TestSynth_artifactQuotaAttack: a tenant renders distinct objects of about 8 KiB each as
// fast as it can (the flood of the shared artifact store: about 9 MB/s, nothing collected for
// an hour, the NATS volume full in minutes). Its renders past its namespace's quota fail
// ArtifactQuotaExceeded (retryable, saying when the count frees) and store nothing; what it
// stored stays within the quota; another namespace still renders. Without the quota every
// render was stored.
func TestSynth_artifactQuotaAttack(t *testing.T) {
	const quota, objects = 40 << 10, 12
	h := newHarnessConfig(t, func(c *synth.Config) {
		c.ArtifactQuota = &bus.ArtifactQuota{Bytes: quota}
	})
	size := func() uint64 { return natstest.ObjectStoreBytes(t, h.js, bus.ObjectStoreArtifacts) }
	before := size()
	spec := func(i int) *lavav1.ArchitectureSpec {
		return &lavav1.ArchitectureSpec{Source: inline(fmt.Sprintf(`(deflava-architecture a :resources ((terraform-data "r" :input "%d-%s")))`,
			i, strings.Repeat("x", 8<<10)))}
	}
	for i := range objects {
		h.observe("attacker", fmt.Sprintf("o%d", i), fmt.Sprintf("uid-%d", i), 1, spec(i))
	}
	var stored int64
	refused := 0
	for i := range objects {
		syn, failed := h.outcome("attacker", fmt.Sprintf("o%d", i), 1)
		if syn != nil {
			stored += syn.GetArtifactSizeBytes()
			continue
		}
		refused++
		if failed.GetReason() != v1alpha1.ReasonArtifactQuotaExceeded || !failed.GetRetryable() ||
			!strings.Contains(failed.GetMessage(), "past its artifact quota") || !strings.Contains(failed.GetMessage(), "leaves the count at") {
			t.Errorf("o%d: Failed %s retryable=%v: %s", i, failed.GetReason(), failed.GetRetryable(), failed.GetMessage())
		}
	}
	if refused == 0 || stored > quota {
		t.Errorf("%d of %d renders refused, %d bytes stored: want renders refused and at most %d bytes", refused, objects, stored, quota)
	}
	// The store's stream holds the stored renders and their meta messages only.
	if grew := size() - before; grew > uint64(stored)+uint64(objects)*2048 {
		t.Errorf("lava-artifacts grew by %d bytes for %d bytes of renders admitted", grew, stored)
	}
	h.observe("victim", "web", "uid-victim", 1, spec(objects))
	if syn, failed := h.outcome("victim", "web", 1); syn == nil {
		t.Errorf("another namespace: Failed %s: %s", failed.GetReason(), failed.GetMessage())
	}
}
