//go:build integration

package synth_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"lukechampine.com/blake3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/bundle"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/lang/tlisp"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
)

const seedSource = `(deflava-architecture demo-vpc
  :inputs ((:cidr "10.42.0.0/16"))
  :resources ((aws-vpc "main" :cidr-block "{cidr}")))
`

func inline(src string) *lavav1.Source {
	return &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}}
}

// TestSynth_outcomes drives synth through the bus exactly as the watcher would and checks the
// outcome of each kind of spec.
func TestSynth_outcomes(t *testing.T) {
	h := newHarness(t, nil)
	position := regexp.MustCompile(`^inline:\d+:\d+: `)
	tests := []struct {
		name       string
		spec       *lavav1.ArchitectureSpec
		wantReason string // "" for Synthesized
		wantMsg    *regexp.Regexp
		check      func(t *testing.T, ev *lavav1.Synthesized)
	}{
		{
			name: "seed manifest renders and passes its gate",
			spec: &lavav1.ArchitectureSpec{Source: inline(seedSource), Bindings: map[string]string{"name": "prod", "cidr": "10.42.0.0/16"},
				Gate: "aws-vpc-network", Engine: lavav1.Engine_ENGINE_TOFU},
			check: func(t *testing.T, ev *lavav1.Synthesized) {
				var doc map[string]any
				if err := json.Unmarshal(h.artifact(ev.GetArtifactDigest()), &doc); err != nil {
					t.Fatal(err)
				}
				got, _ := json.Marshal(doc)
				if string(got) != `{"resource":{"aws_vpc":{"main":{"cidr_block":"10.42.0.0/16"}}}}` {
					t.Errorf("artifact = %s", got)
				}
				if !ev.GetGate().GetPassed() || ev.GetGate().GetGate() != "aws-vpc-network" || len(ev.GetGate().GetWarnings()) == 0 {
					t.Errorf("gate verdict = %v, want passed with the undeclared-inputs warning", ev.GetGate())
				}
				if ev.GetEngine() != lavav1.Engine_ENGINE_TOFU || ev.GetApprovePlan() != "auto" {
					t.Errorf("engine %v approve %q", ev.GetEngine(), ev.GetApprovePlan())
				}
				r := ev.GetRender()
				if r.GetSourceKind() != lavav1.SourceKind_SOURCE_KIND_INLINE || r.GetResourceCount() != 1 || r.GetArchitectureName() != "demo-vpc" ||
					r.GetObservedGeneration() != 1 || r.GetRenderedAt() == nil || !bus.ValidDigest(r.GetTerraformJsonDigest()) {
					t.Errorf("render record = %v", r)
				}
				if ev.GetArtifactDigest() != bus.Digest(h.artifact(ev.GetArtifactDigest())) || ev.GetArtifactSizeBytes() == 0 {
					t.Errorf("artifact digest %s size %d", ev.GetArtifactDigest(), ev.GetArtifactSizeBytes())
				}
			},
		},
		{
			name: "bundled name renders with its providers",
			spec: &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Name{Name: "aws-vpc-network"}}, ApprovePlan: "manual"},
			check: func(t *testing.T, ev *lavav1.Synthesized) {
				if ev.GetRender().GetSourceKind() != lavav1.SourceKind_SOURCE_KIND_NAME || ev.GetRender().GetResourceCount() != 11 {
					t.Errorf("render = %v", ev.GetRender())
				}
				if ev.GetEngine() != lavav1.Engine_ENGINE_EMBEDDED || ev.GetApprovePlan() != "manual" {
					t.Errorf("engine %v approve %q", ev.GetEngine(), ev.GetApprovePlan())
				}
			},
		},
		{
			name: "bundled name ships its module directories in the artifact",
			spec: &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Name{Name: "modules-demo"}}},
			check: func(t *testing.T, ev *lavav1.Synthesized) {
				mods, err := bundle.Read(h.artifact(ev.GetArtifactDigest()))
				if err != nil || len(mods) != 2 || mods["modules/stamp"] == nil || mods["modules/stamp/tag"] == nil {
					t.Errorf("bundled modules %v (%v), want modules/stamp and modules/stamp/tag", mods, err)
				}
			},
		},
		{
			name: "inline source with a local module",
			spec: &lavav1.ArchitectureSpec{Source: inline(`(deflava-architecture tenant
  :modules ((net :source "./modules/net"))
  :resources ())`)},
			wantReason: "SynthesisFailed",
			wantMsg:    regexp.MustCompile(`^inline:2:13: module net: the local source "\./modules/net" names a module directory, but an inline source has no bundle`),
		},
		{
			name:       "syntax error",
			spec:       &lavav1.ArchitectureSpec{Source: inline("(deflava-architecture broken\n  :resources ((aws-vpc \"main\" :cidr-block )))\n)")},
			wantReason: "SynthesisFailed",
			wantMsg:    position,
		},
		{
			name: "evaluation error",
			spec: &lavav1.ArchitectureSpec{Source: inline(`(deflava-architecture e
  :resources ((local-file "f" :filename "/tmp/x" :count (+ 1 2))))`)},
			wantReason: "SynthesisFailed",
			wantMsg:    regexp.MustCompile(`^inline:2:\d+: .*integer`),
		},
		{
			name:       "gate rejection",
			spec:       &lavav1.ArchitectureSpec{Source: inline(seedSource), Bindings: map[string]string{"cidr": "banana"}, Gate: "aws-vpc-network"},
			wantReason: "GateRejected",
			wantMsg:    regexp.MustCompile("interface `aws-vpc-network` rejected 1 field\\(s\\): type error on input `cidr`"),
		},
		{
			name:       "unknown gate",
			spec:       &lavav1.ArchitectureSpec{Source: inline(seedSource), Gate: "no-such-interface"},
			wantReason: "GateRejected",
			wantMsg:    regexp.MustCompile(`unknown bundled interface "no-such-interface"`),
		},
		{
			name: "flux source without a resolved artifact",
			spec: &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Flux{Flux: &lavav1.FluxSource{
				Kind: "GitRepository", Name: "infra", Path: "a.tlisp"}}}},
			wantReason: "SourceNotReady",
			wantMsg:    regexp.MustCompile(`no artifact of GitRepository .*/infra was resolved`),
		},
		{
			name:       "unknown bundled name",
			spec:       &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Name{Name: "no-such-architecture"}}},
			wantReason: "SourceUnsupported",
			wantMsg:    regexp.MustCompile(`unknown bundled architecture "no-such-architecture"`),
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "r" + string(rune('a'+i))
			obs := h.observe("team", name, "uid-"+name, 1, tt.spec)
			syn, failed := h.outcome("team", name, 1)
			if tt.wantReason == "" {
				if syn == nil {
					t.Fatalf("Failed %s: %s", failed.GetReason(), failed.GetMessage())
				}
				if env := syn.GetEnvelope(); env.GetCorrelationId() != obs.GetEnvelope().GetEventId() ||
					env.GetTrigger() != "cause:"+obs.GetEnvelope().GetEventId() || env.GetSource() != "synth" {
					t.Errorf("envelope = %v", env)
				}
				tt.check(t, syn)
				return
			}
			if failed == nil {
				t.Fatalf("Synthesized, want Failed %s", tt.wantReason)
			}
			if failed.GetStage() != lavav1.Stage_STAGE_SYNTH || failed.GetReason() != tt.wantReason || failed.GetAttempt() != 1 {
				t.Errorf("Failed stage %v reason %q attempt %d, want SYNTH %q 1", failed.GetStage(), failed.GetReason(), failed.GetAttempt(), tt.wantReason)
			}
			if !tt.wantMsg.MatchString(failed.GetMessage()) {
				t.Errorf("message %q does not match %s", failed.GetMessage(), tt.wantMsg)
			}
		})
	}
}

// TestSynth_idempotentAndGenerations: a re-published ResourceObserved yields the same event id
// (stored once), and an older generation delivered after a newer one is dropped.
func TestSynth_idempotentAndGenerations(t *testing.T) {
	h := newHarness(t, nil)
	spec := func(cidr string) *lavav1.ArchitectureSpec {
		return &lavav1.ArchitectureSpec{Source: inline(seedSource), Bindings: map[string]string{"cidr": cidr}}
	}
	first := h.observe("team", "vpc", "uid-1", 2, spec("10.2.0.0/16"))
	syn := await[*lavav1.Synthesized](h, "team", "vpc", 2)
	// The watcher re-publishing the same fact: JetStream drops it, and a redelivery of the same
	// event would yield the same Synthesized id.
	again := h.observe("team", "vpc", "uid-1", 2, spec("10.2.0.0/16"))
	if again.GetEnvelope().GetEventId() != first.GetEnvelope().GetEventId() {
		t.Fatal("event ids differ")
	}
	// Generation 1 arriving late is stale.
	h.observe("team", "vpc", "uid-1", 1, spec("10.1.0.0/16"))
	h.observe("team", "vpc", "uid-1", 3, spec("10.3.0.0/16"))
	await[*lavav1.Synthesized](h, "team", "vpc", 3)
	if n := h.count(bus.PhaseSubject("team", "vpc", bus.EventSynthesized)); n != 2 {
		t.Errorf("%d Synthesized published, want 2 (generations 2 and 3; 1 is stale, the repeat is one fact)", n)
	}
	if syn.GetEnvelope().GetEventId() == "" || syn.GetRender().GetObservedGeneration() != 2 {
		t.Errorf("Synthesized = %v", syn)
	}
}

// TestSynth_bindingsFrom reads ConfigMaps and Secrets from a real API server: later entries
// override earlier ones, spec.bindings overrides all, the bindings digest is keyed for Secret
// values, and no Secret value appears in any published event's bytes or in the logs, even when
// the value is in an error path.
func TestSynth_bindingsFrom(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	const (
		secretToken = "tok-7f3c9e21-do-not-leak"
		secretIP    = "hunter2-not-an-ip-value"
	)
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "base"},
			Data: map[string]string{"dir": "/from-configmap", "label": "from-configmap", "zone-id": "Z1", "name": "www", "domain": "example.com"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "override"}, Data: map[string]string{"label": "from-second-configmap"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
			Data: map[string][]byte{"token": []byte(secretToken), "other": []byte("unused-secret-value")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-ip"}, Data: map[string][]byte{"apex-target": []byte(secretIP)}},
	} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t, env.Client)
	// arch creates the LavaArchitecture an event is about and returns its UID: synth reads
	// bindingsFrom only for an object the API server has.
	arch := func(name string) string {
		t.Helper()
		o := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Name: "aws-vpc-network"}}}
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		return string(o.UID)
	}
	cm := func(name, key string) *lavav1.BindingsFromRef {
		return &lavav1.BindingsFromRef{Ref: &lavav1.BindingsFromRef_ConfigMapRef{ConfigMapRef: &lavav1.ObjectKeyRef{Name: name, Key: key}}}
	}
	sec := func(name, key string) *lavav1.BindingsFromRef {
		return &lavav1.BindingsFromRef{Ref: &lavav1.BindingsFromRef_SecretRef{SecretRef: &lavav1.ObjectKeyRef{Name: name, Key: key}}}
	}
	const src = `(deflava-architecture uses-bindings
  :inputs ((:dir "/d") (:label "l") (:token "t") (:extra "e"))
  :resources ((terraform-data "cfg" :input "{dir}|{label}|{extra}")
              (terraform-data "secret" :input "{token}")))`

	// Success: the rendered JSON (an artifact, not an event) carries the values; events do not.
	h.observe(ns, "ok", arch("ok"), 1, &lavav1.ArchitectureSpec{Source: inline(src),
		BindingsFrom: []*lavav1.BindingsFromRef{cm("base", ""), cm("override", ""), sec("creds", "token")},
		Bindings:     map[string]string{"extra": "from-spec", "dir": "/from-spec"}})
	syn, failed := h.outcome(ns, "ok", 1)
	if syn == nil {
		t.Fatalf("Failed %s: %s", failed.GetReason(), failed.GetMessage())
	}
	var doc struct {
		Resource struct {
			TerraformData map[string]struct {
				Input string `json:"input"`
			} `json:"terraform_data"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(h.artifact(syn.GetArtifactDigest()), &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Resource.TerraformData["cfg"].Input; got != "/from-spec|from-second-configmap|from-spec" {
		t.Errorf("cfg input = %q: want spec.bindings over every bindingsFrom entry and the later ConfigMap over the earlier", got)
	}
	// A Secret's value reaches the engine marked sensitive (docs/security.md, "Rendering").
	if got := doc.Resource.TerraformData["secret"].Input; got != render.SensitiveTemplate(secretToken) {
		t.Errorf("secret input = %q, want %q", got, render.SensitiveTemplate(secretToken))
	}
	// The digest is keyed: the same bindings with another installation key differ, and the
	// plain (unkeyed) digest of the bindings is not what was published.
	plain, err := render.BindingsDigest(synthBindings(map[string]string{"dir": "/from-spec", "label": "from-second-configmap",
		"extra": "from-spec", "token": secretToken, "zone-id": "Z1", "name": "www", "domain": "example.com"}), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if syn.GetRender().GetBindingsDigest() == plain || !bus.ValidDigest(syn.GetRender().GetBindingsDigest()) {
		t.Errorf("bindings digest %s is the plain digest of the bindings: a secret must enter it keyed", syn.GetRender().GetBindingsDigest())
	}
	// So are the artifact's name and the terraformJSONDigest: the JSON holds the secret, and
	// neither digest is the plain BLAKE3 or SHA-256 of it (docs/security.md, "Rendering").
	rendered := h.artifact(syn.GetArtifactDigest())
	sha := sha256.Sum256(rendered)
	if d := syn.GetArtifactDigest(); d != keyedDigest(rendered, h.key) || d == bus.Digest(rendered) || d == hex.EncodeToString(sha[:]) {
		t.Errorf("artifact digest %s of a render with a Secret binding: want the keyed %s, not the plain BLAKE3 %s", d, keyedDigest(rendered, h.key), bus.Digest(rendered))
	}
	if plainJSON, err := render.DigestJSON(rendered); err != nil || syn.GetRender().GetTerraformJsonDigest() == plainJSON {
		t.Errorf("terraformJSONDigest %s is the plain digest of the JSON (%v)", syn.GetRender().GetTerraformJsonDigest(), err)
	}

	// Failures whose messages would carry a Secret value.
	h.observe(ns, "gate", arch("gate"), 1, &lavav1.ArchitectureSpec{
		Source:       &lavav1.Source{Kind: &lavav1.Source_Name{Name: "dns-record-set"}},
		Gate:         "dns-record-set",
		BindingsFrom: []*lavav1.BindingsFromRef{cm("base", ""), sec("bad-ip", "")},
	})
	_, failed = h.outcome(ns, "gate", 1)
	if failed == nil || failed.GetReason() != "GateRejected" || !strings.Contains(failed.GetMessage(), "apex-target") ||
		!strings.Contains(failed.GetMessage(), "redacted") {
		t.Errorf("gate failure = %v, want GateRejected about apex-target with the value redacted", failed)
	}
	h.observe(ns, "eval", arch("eval"), 1, &lavav1.ArchitectureSpec{
		Source:       inline("(deflava-architecture e\n  :inputs ((:token \"x\"))\n  :resources ((terraform-data \"d\" :when \"{token}\"))))"),
		BindingsFrom: []*lavav1.BindingsFromRef{sec("creds", "token")},
	})
	if _, failed = h.outcome(ns, "eval", 1); failed == nil || failed.GetReason() != "SynthesisFailed" {
		t.Errorf("eval failure = %v, want SynthesisFailed", failed)
	}

	// Missing objects and keys fail clearly (and may be retried once created).
	for name, ref := range map[string]*lavav1.BindingsFromRef{"missing-secret": sec("nope", ""), "missing-key": cm("base", "nope")} {
		h.observe(ns, name, arch(name), 1, &lavav1.ArchitectureSpec{Source: inline(seedSource), BindingsFrom: []*lavav1.BindingsFromRef{ref}})
		_, failed := h.outcome(ns, name, 1)
		if failed == nil || failed.GetReason() != "SynthesisFailed" || !failed.GetRetryable() || !strings.Contains(failed.GetMessage(), "nope") {
			t.Errorf("%s: %v, want a retryable SynthesisFailed naming the missing object or key", name, failed)
		}
	}

	// A forged ResourceObserved (an object the API server does not have, or another UID of a
	// name it has) reads no Secret: terminated and reported, nothing synthesized or failed.
	arch("victim")
	for name, uid := range map[string]string{"ghost": "uid-ghost", "victim": "uid-forged"} {
		before := h.count("lava.anomaly.functional.poison_message")
		h.observe(ns, name, uid, 1, &lavav1.ArchitectureSpec{Source: inline(src), BindingsFrom: []*lavav1.BindingsFromRef{sec("creds", "token")}})
		deadline := time.Now().Add(30 * time.Second)
		for h.count("lava.anomaly.functional.poison_message") == before {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no poison report for a forged ResourceObserved; seen:\n%s", name, h.seen())
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n := h.count(bus.PhaseSubject(ns, name, bus.EventSynthesized)) + h.count(bus.PhaseSubject(ns, name, bus.EventFailed)); n != 0 {
			t.Errorf("%s: a forged ResourceObserved was synthesized or failed (%d events)", name, n)
		}
	}

	for _, secret := range []string{secretToken, secretIP, "unused-secret-value"} {
		if where := h.leaks(secret); len(where) > 0 {
			t.Errorf("Secret value %q leaked into %v", secret, where)
		}
	}
}

func synthBindings(scalars map[string]string) tlisp.Bindings {
	return tlisp.Bindings{Scalars: scalars, Lists: map[string][]string{}, Records: map[string][]map[string]string{}}
}

// TestSynth_suspendedGenerationStartsNoPass: the watcher publishes a suspended generation
// (spec.suspend true) for drift and viggy; synth publishes nothing for it, drops an older
// generation delivered after it, and synthesizes the resumed generation.
func TestSynth_suspendedGenerationStartsNoPass(t *testing.T) {
	h := newHarness(t, nil)
	spec := func(suspend bool) *lavav1.ArchitectureSpec {
		return &lavav1.ArchitectureSpec{Source: inline(seedSource), Bindings: map[string]string{"cidr": "10.2.0.0/16"}, Suspend: suspend}
	}
	h.observe("team", "held", "uid-1", 2, spec(true))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(h.logs.String(), "suspended generation: no pass") {
		if time.Now().After(deadline) {
			t.Fatalf("the suspended generation was not handled within 10s; logs:\n%s", h.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.observe("team", "held", "uid-1", 1, spec(false))
	h.observe("team", "held", "uid-1", 3, spec(false))
	syn := await[*lavav1.Synthesized](h, "team", "held", 3)
	if syn.GetRender().GetObservedGeneration() != 3 {
		t.Errorf("Synthesized = %v", syn)
	}
	for _, ev := range []string{bus.EventSynthesized, bus.EventFailed} {
		if n := h.count(bus.PhaseSubject("team", "held", ev)); n != map[string]int{bus.EventSynthesized: 1, bus.EventFailed: 0}[ev] {
			t.Errorf("%d %s published; want only generation 3's Synthesized (2 is suspended, 1 is stale)", n, ev)
		}
	}
}

// keyedDigest is the name the artifact store gives data under an installation key
// (bus.Artifacts.PutKeyed): the keyed BLAKE3-256 of "lava.artifact-digest.v1", a zero byte and
// data, in lowercase hex.
func keyedDigest(data, key []byte) string {
	h := blake3.New(32, key)
	_, _ = h.Write([]byte("lava.artifact-digest.v1\x00"))
	_, _ = h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}
