//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/encoding/protojson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/test/e2e/harness"
)

// runBound bounds the whole end-to-end run.
const runBound = 10 * time.Minute

// resource names one LavaArchitecture of the run.
type resource struct{ ns, name string }

func (r resource) String() string { return r.ns + "/" + r.name }

var (
	seed    = resource{"infra", "prod-vpc"}
	network = resource{"infra", "preview-network"}
	dns     = resource{"web", "shop-dns"}
	embFile = resource{"demo", "files-embedded"}
	tofFile = resource{"demo", "files-tofu"}
)

// anomalies collects what a plain NATS subscriber on lava.anomaly.> receives.
type anomalies struct {
	mu   sync.Mutex
	msgs []*nats.Msg
}

func (a *anomalies) add(m *nats.Msg) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.msgs = append(a.msgs, m)
}

// find returns the first anomaly about r of the given kind, decoded from its protojson body.
func (a *anomalies) find(r resource, kind lavav1.AnomalyKind) (*lavav1.AnomalyDetected, string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.msgs {
		ev := &lavav1.AnomalyDetected{}
		if err := protojson.Unmarshal(m.Data, ev); err != nil {
			continue
		}
		res := ev.GetEnvelope().GetResource()
		if res.GetNamespace() == r.ns && res.GetName() == r.name && ev.GetKind() == kind {
			return ev, m.Subject, true
		}
	}
	return nil, "", false
}

func (a *anomalies) describe() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var b strings.Builder
	for _, m := range a.msgs {
		fmt.Fprintf(&b, "%s %s\n", m.Subject, m.Data)
	}
	return b.String()
}

// TestEndToEnd runs Lava as in production (every service its own process, the real API
// server, NATS, OpenTofu and the provider mirror) and drives it with kubectl only.
func TestEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), runBound)
	defer cancel()
	env := harness.Start(t, harness.Options{})
	kc := newClient(t, env.Kubeconfig)

	// A NATS subscriber with the read-only subscriber identity, as an alerting integration
	// would run it; an anonymous client is refused (authorization and TLS are on).
	if anon, err := nats.Connect(env.NATSURL, nats.RootCAs(env.PKI.CAFile), nats.ClientCert(env.PKI.ClientCert, env.PKI.ClientKey)); err == nil {
		anon.Close()
		t.Fatal("the installation's NATS accepted an anonymous client")
	}
	nc := env.ConnectAs(t, bus.IdentitySubscriber)
	var got anomalies
	if _, err := nc.Subscribe("lava.anomaly.>", got.add); err != nil {
		t.Fatal(err)
	}

	// harness.Start installed the CRDs with `lava crds | kubectl apply -f -`.
	out, err := env.Kubectl(ctx, "", "get", "crd", "-o", "name")
	if err != nil || !strings.Contains(out, "lavaarchitectures.lava.pleme.io") {
		t.Fatalf("CRDs: %q %v", out, err)
	}
	for _, ns := range []string{"infra", "web", "demo"} {
		if _, err := env.Kubectl(ctx, "", "create", "namespace", ns); err != nil {
			t.Fatal(err)
		}
	}

	// Everything is applied at once, as a user would apply a directory: the seed manifest and
	// two more of examples/cloud, which need the AWS provider this installation's mirror lacks.
	examples := filepath.Join(env.Root, "examples", "cloud")
	for _, f := range []string{"prod-vpc.yaml", "aws-vpc-network.yaml", "dns-record-set.yaml"} {
		if _, err := env.Kubectl(ctx, "", "apply", "-f", filepath.Join(examples, f)); err != nil {
			t.Fatal(err)
		}
	}
	dirs := map[resource]string{embFile: filepath.Join(env.Files(t), "embedded"), tofFile: filepath.Join(env.Files(t), "tofu")}
	demo, err := os.ReadFile("testdata/demo-files.yaml")
	if err != nil {
		t.Fatal(err)
	}
	demo = bytes.ReplaceAll(demo, []byte("DIR_EMBEDDED"), []byte(dirs[embFile]))
	demo = bytes.ReplaceAll(demo, []byte("DIR_TOFU"), []byte(dirs[tofFile]))
	if _, err := env.Kubectl(ctx, string(demo), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}

	t.Run("seed manifest: Synthesized, then provider unavailable", func(t *testing.T) {
		la := waitPhase(ctx, t, env, kc, seed, v1alpha1.PhaseFailed, 3*time.Minute)
		checkRendered(t, la, 1)
		checkCondition(t, la, v1alpha1.ConditionGated, metav1.ConditionTrue, v1alpha1.ReasonGatePassed)
		checkProviderUnavailable(t, la, "hashicorp/aws")
		desc := describe(ctx, t, env, seed)
		checkDescribe(t, desc, "Failed", "Failed")
		conds := describedConditions(desc)
		if c := conds[v1alpha1.ConditionSynthesized]; c != [2]string{"True", v1alpha1.ReasonSynthesisSucceeded} {
			t.Errorf("kubectl describe: Synthesized %v", c)
		}
		if !slices.ContainsFunc(slices.Collect(maps.Values(conds)), func(c [2]string) bool { return c == [2]string{"False", "ProviderUnavailable"} }) {
			t.Errorf("kubectl describe shows no condition False/ProviderUnavailable: %v\n%s", conds, desc)
		}
	})

	t.Run("bundled architectures by name with bindings: rendered, then provider unavailable", func(t *testing.T) {
		for _, r := range []resource{network, dns} {
			la := waitPhase(ctx, t, env, kc, r, v1alpha1.PhaseFailed, 3*time.Minute)
			if la.Status.Render == nil || la.Status.Render.SourceKind != v1alpha1.SourceKindName || la.Status.Render.ArchitectureName == "" {
				t.Errorf("%s: render record %+v does not name the bundled architecture", r, la.Status.Render)
			}
			checkRendered(t, la, 2)
			checkProviderUnavailable(t, la, "hashicorp/aws")
			checkDescribe(t, describe(ctx, t, env, r), "Failed", "Failed")
		}
	})

	t.Run("demo architectures apply on the embedded and tofu engines", func(t *testing.T) {
		for _, r := range []resource{embFile, tofFile} {
			la := waitPhase(ctx, t, env, kc, r, v1alpha1.PhaseApplied, 4*time.Minute)
			checkRendered(t, la, 3)
			checkCondition(t, la, v1alpha1.ConditionReady, metav1.ConditionTrue, "")
			checkFile(t, filepath.Join(dirs[r], "greeting.txt"), "hello\n")
			checkFile(t, filepath.Join(dirs[r], "kit.txt"), "kit says hello\n")
			desc := describe(ctx, t, env, r)
			checkDescribe(t, desc, "Applied", "Applied")
			if c := describedConditions(desc)[v1alpha1.ConditionReady]; c[0] != "True" {
				t.Errorf("%s: kubectl describe shows Ready %v:\n%s", r, c, desc)
			}
		}
	})

	t.Run("kubectl get lava shows ready, phase, engine, resources and the Ready message", func(t *testing.T) {
		out, err := env.Kubectl(ctx, "", "get", "lava", "-A")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubectl get lava -A:\n%s", out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"NAMESPACE", "NAME", "READY", "PHASE", "ENGINE", "RESOURCES", "AGE", "MESSAGE"}) {
			t.Errorf("columns %q", got)
		}
		want := map[string][]string{
			seed.ns + " " + seed.name:       {"False", "Failed", "embedded", "1"},
			embFile.ns + " " + embFile.name: {"True", "Applied", "embedded", "3"},
			tofFile.ns + " " + tofFile.name: {"True", "Applied", "tofu", "3"},
		}
		// MESSAGE is the Ready condition's message, after AGE.
		wantMessage := map[string]string{
			seed.ns + " " + seed.name:       "provider hashicorp/aws is not available",
			embFile.ns + " " + embFile.name: "applied generation 1",
			tofFile.ns + " " + tofFile.name: "applied generation 1",
		}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if w, ok := want[f[0]+" "+f[1]]; ok {
				if !slices.Equal(f[2:6], w) {
					t.Errorf("row %q: want %v", l, w)
				}
				if m := strings.Join(f[7:], " "); !strings.HasPrefix(m, wantMessage[f[0]+" "+f[1]]) {
					t.Errorf("row %q: message %q, want it to start with %q", l, m, wantMessage[f[0]+" "+f[1]])
				}
				delete(want, f[0]+" "+f[1])
			}
		}
		if len(want) > 0 {
			t.Errorf("rows missing: %v", want)
		}
	})

	t.Run("out-of-band change: drift anomaly on lava.anomaly.>, AutoCorrect restores the file", func(t *testing.T) {
		for _, r := range []resource{embFile, tofFile} {
			if err := os.WriteFile(filepath.Join(dirs[r], "greeting.txt"), []byte("changed out of band\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range []resource{embFile, tofFile} {
			// The drift interval is 30s (±10% jitter), then a scan, viggy's decision and a re-apply.
			var an *lavav1.AnomalyDetected
			var subject string
			poll(ctx, t, env, 2*time.Minute, func() (bool, string) {
				var ok bool
				an, subject, ok = got.find(r, lavav1.AnomalyKind_ANOMALY_KIND_DRIFT_DETECTED)
				return ok, "anomalies so far:\n" + got.describe()
			})
			if !strings.HasPrefix(subject, "lava.anomaly.") || !strings.HasSuffix(subject, ".drift_detected") {
				t.Errorf("%s: anomaly subject %q", r, subject)
			}
			if an.GetSeverity() == lavav1.Severity_SEVERITY_UNSPECIFIED {
				t.Errorf("%s: anomaly without severity: %v", r, an)
			}
			path := filepath.Join(dirs[r], "greeting.txt")
			poll(ctx, t, env, 2*time.Minute, func() (bool, string) {
				b, err := os.ReadFile(path)
				return err == nil && string(b) == "hello\n", fmt.Sprintf("%s holds %q (%v)", path, b, err)
			})
			waitPhase(ctx, t, env, kc, r, v1alpha1.PhaseApplied, 2*time.Minute)
		}
	})

	t.Run("a binding change updates the object in place", func(t *testing.T) {
		before := get(ctx, t, kc, embFile)
		beforePlan := ""
		if before.Status.Plan != nil {
			beforePlan = before.Status.Plan.ID
		}
		if _, err := env.Kubectl(ctx, "", "patch", "lava", embFile.name, "-n", embFile.ns, "--type=merge",
			"-p", `{"spec":{"bindings":{"greeting":"bonjour"}}}`); err != nil {
			t.Fatal(err)
		}
		var la *v1alpha1.LavaArchitecture
		poll(ctx, t, env, 3*time.Minute, func() (bool, string) {
			la = get(ctx, t, kc, embFile)
			newPlan := la.Status.Plan != nil && la.Status.Plan.ID != beforePlan
			return la.Status.ObservedGeneration == before.Generation+1 && la.Status.Phase == v1alpha1.PhaseApplied && newPlan,
				fmt.Sprintf("generation %d observed %d phase %s plan %+v", la.Generation, la.Status.ObservedGeneration, la.Status.Phase, la.Status.Plan)
		})
		if la.UID != before.UID {
			t.Errorf("uid changed %s -> %s: the object was re-created", before.UID, la.UID)
		}
		if la.Status.Plan == nil || la.Status.Plan.Change < 1 || la.Status.Plan.ID == beforePlan {
			t.Errorf("plan after the binding change: %+v (before %+v); want a new plan with an in-place change", la.Status.Plan, before.Status.Plan)
		}
		checkFile(t, filepath.Join(dirs[embFile], "greeting.txt"), "bonjour\n")
		checkFile(t, filepath.Join(dirs[embFile], "kit.txt"), "kit says bonjour\n")
	})

	t.Run("live bindings and chained objects", func(t *testing.T) { testChain(ctx, t, env, kc) })

	t.Run("every service's /metrics passes promlint", func(t *testing.T) {
		for _, s := range harness.Services() {
			body, err := env.Metrics(ctx, s)
			if err != nil {
				t.Error(err)
				continue
			}
			lintMetrics(t, s, body)
		}
	})

	t.Run("delete destroys and releases the finalizer", func(t *testing.T) {
		for _, r := range []resource{embFile, tofFile, seed, network, dns} {
			if _, err := env.Kubectl(ctx, "", "delete", "lava", r.name, "-n", r.ns, "--wait=false"); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range []resource{embFile, tofFile, seed, network, dns} {
			poll(ctx, t, env, 3*time.Minute, func() (bool, string) {
				out, err := env.Kubectl(ctx, "", "get", "lava", r.name, "-n", r.ns, "--ignore-not-found", "-o", "jsonpath={.status.phase} {.metadata.finalizers}")
				return err == nil && out == "", fmt.Sprintf("%s still there: %q %v", r, out, err)
			})
		}
		for _, r := range []resource{embFile, tofFile} {
			for _, f := range []string{"greeting.txt", "kit.txt"} {
				if _, err := os.Stat(filepath.Join(dirs[r], f)); !os.IsNotExist(err) {
					t.Errorf("%s: %s survived the destroy (%v)", r, f, err)
				}
			}
		}
	})

	t.Run("lava receipts verify passes for every resource", func(t *testing.T) {
		for _, r := range []resource{seed, network, dns, embFile, tofFile} {
			out, err := env.Lava(ctx, "receipts", "verify", r.String(), "--nats-url", env.NATSURL,
				"--require-signatures", "--public-key", env.PublicKeyFile)
			if err != nil {
				t.Errorf("%s: %v", r, err)
				continue
			}
			if !regexp.MustCompile(`: ok \([1-9][0-9]* receipts?`).MatchString(out) {
				t.Errorf("%s: lava receipts verify printed %q", r, out)
			}
			t.Logf("%s", strings.TrimSpace(out))
		}
	})

	if err := env.Dead(); err != nil {
		t.Errorf("a process died during the run: %v", err)
	}
}

func newClient(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// The test reads objects; controller-runtime's own logs would only be noise.
	crlog.SetLogger(logr.Discard())
	scheme, err := kubetest.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func get(ctx context.Context, t *testing.T, kc client.Client, r resource) *v1alpha1.LavaArchitecture {
	t.Helper()
	la := &v1alpha1.LavaArchitecture{}
	if err := kc.Get(ctx, types.NamespacedName{Namespace: r.ns, Name: r.name}, la); err != nil {
		t.Fatalf("get %s: %v", r, err)
	}
	return la
}

// poll calls cond every 250ms until it holds, failing the test with cond's last description
// after d, when the run's bound passes, or when a service process died.
func poll(ctx context.Context, t *testing.T, env *harness.Env, d time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if err := env.Dead(); err != nil {
			t.Fatalf("%v; waiting for: %s", err, why)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("not within %v: %s", d, why)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func waitPhase(ctx context.Context, t *testing.T, env *harness.Env, kc client.Client, r resource, phase v1alpha1.Phase, d time.Duration) *v1alpha1.LavaArchitecture {
	t.Helper()
	var la *v1alpha1.LavaArchitecture
	poll(ctx, t, env, d, func() (bool, string) {
		la = get(ctx, t, kc, r)
		return la.Status.Phase == phase && la.Status.ObservedGeneration == la.Generation,
			fmt.Sprintf("%s in phase %q (generation %d, observed %d), want %s; conditions %s", r, la.Status.Phase, la.Generation,
				la.Status.ObservedGeneration, phase, conditions(la))
	})
	return la
}

func conditions(la *v1alpha1.LavaArchitecture) string {
	var b strings.Builder
	for _, c := range la.Status.Conditions {
		fmt.Fprintf(&b, "\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func checkCondition(t *testing.T, la *v1alpha1.LavaArchitecture, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	for _, c := range la.Status.Conditions {
		if c.Type == typ {
			if c.Status != status || (reason != "" && c.Reason != reason) {
				t.Errorf("%s/%s: condition %s=%s reason %s, want %s %s", la.Namespace, la.Name, typ, c.Status, c.Reason, status, reason)
			}
			if c.ObservedGeneration != 0 && c.ObservedGeneration != la.Generation {
				t.Errorf("%s/%s: condition %s for generation %d, object at %d", la.Namespace, la.Name, typ, c.ObservedGeneration, la.Generation)
			}
			return
		}
	}
	t.Errorf("%s/%s: no %s condition:%s", la.Namespace, la.Name, typ, conditions(la))
}

// checkRendered: Synthesized=True with the render record of at least min resources.
func checkRendered(t *testing.T, la *v1alpha1.LavaArchitecture, min int32) {
	t.Helper()
	checkCondition(t, la, v1alpha1.ConditionSynthesized, metav1.ConditionTrue, v1alpha1.ReasonSynthesisSucceeded)
	r := la.Status.Render
	if r == nil || r.ResourceCount < min || len(r.TerraformJSONDigest) == 0 || r.BindingsDigest == "" || r.SourceDigest == "" {
		t.Errorf("%s/%s: render record %+v, want one with at least %d resources and its digests", la.Namespace, la.Name, r, min)
	}
}

// checkProviderUnavailable: the documented failure (examples/README.md, docs/events.md): phase Failed,
// reason ProviderUnavailable naming the provider, not retried (Stalled), not Ready.
func checkProviderUnavailable(t *testing.T, la *v1alpha1.LavaArchitecture, provider string) {
	t.Helper()
	found := false
	for _, c := range la.Status.Conditions {
		if c.Reason == "ProviderUnavailable" && strings.Contains(c.Message, "provider "+provider) && strings.Contains(c.Message, "not available") {
			found = true
		}
	}
	if !found {
		t.Errorf("%s/%s: no condition with reason ProviderUnavailable naming %s:%s", la.Namespace, la.Name, provider, conditions(la))
	}
	checkCondition(t, la, v1alpha1.ConditionReady, metav1.ConditionFalse, "")
	checkCondition(t, la, v1alpha1.ConditionStalled, metav1.ConditionTrue, "")
}

func describe(ctx context.Context, t *testing.T, env *harness.Env, r resource) string {
	t.Helper()
	out, err := env.Kubectl(ctx, "", "describe", "lava", r.name, "-n", r.ns)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkDescribe: kubectl describe shows the phase and, in its Events section, the event
// reasons in this order (the watcher records Events only for the transitions a user acts on:
// Applied, Failed, Drifted, AwaitingApproval; docs/design/0007-status-writes.md).
func checkDescribe(t *testing.T, desc, phase string, reasons ...string) {
	t.Helper()
	if !regexp.MustCompile(`(?m)^\s+Phase:\s+` + phase + `$`).MatchString(desc) {
		t.Errorf("kubectl describe does not show Phase: %s:\n%s", phase, desc)
	}
	_, events, ok := strings.Cut(desc, "\nEvents:")
	if !ok {
		t.Errorf("kubectl describe has no Events section:\n%s", desc)
		return
	}
	// Events are listed oldest first: the reasons must appear in order.
	at := 0
	for _, r := range reasons {
		i := regexp.MustCompile(`\s` + r + `\s`).FindStringIndex(events[at:])
		if i == nil {
			t.Errorf("kubectl describe: no %s event after position %d:%s", r, at, events)
			return
		}
		at += i[1] - 1
	}
}

// describedConditions reads the Conditions block of kubectl describe: type to (status, reason).
func describedConditions(desc string) map[string][2]string {
	out := map[string][2]string{}
	_, block, ok := strings.Cut(desc, "\n  Conditions:\n")
	if !ok {
		return out
	}
	var status, reason string
	for _, l := range strings.Split(block, "\n") {
		if !strings.HasPrefix(l, "    ") {
			break
		}
		k, v, _ := strings.Cut(strings.TrimSpace(l), ":")
		v = strings.TrimSpace(v)
		switch k {
		case "Status":
			status = v
		case "Reason":
			reason = v
		case "Type":
			out[v] = [2]string{status, reason}
			status, reason = "", ""
		}
	}
	return out
}

func checkFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != want {
		t.Errorf("%s = %q (%v), want %q", path, b, err, want)
	}
}

// lintMetrics parses a text exposition with expfmt and lints it with promlint.
func lintMetrics(t *testing.T, service string, body []byte) {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s: /metrics does not parse: %v", service, err)
		return
	}
	var mfs []*dto.MetricFamily
	lava := 0
	for name, mf := range families {
		mfs = append(mfs, mf)
		if strings.HasPrefix(name, "lava_") {
			lava++
		}
	}
	if lava == 0 {
		t.Errorf("%s: /metrics has no lava_* metric (%d families)", service, len(mfs))
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Errorf("%s: promlint: %v", service, err)
	}
	for _, p := range problems {
		t.Errorf("%s: promlint: %s: %s", service, p.Metric, p.Text)
	}
	t.Logf("%s: %d metric families, %d lava_*, promlint clean: %v", service, len(mfs), lava, len(problems) == 0)
}
