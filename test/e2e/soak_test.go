//go:build e2e && soak

package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/procfs"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/test/e2e/harness"
)

// The soak's knobs (`make soak SOAK_DURATION=2h`; built only with the soak tag, never in make test).
var (
	flagSoakDuration = flag.Duration("soak.duration", 2*time.Hour, "how long TestSoak churns")
	flagSoakObjects  = flag.Int("soak.objects", 100, "LavaArchitecture names TestSoak churns")
	flagSoakSample   = flag.Duration("soak.sample", 0, "sampling period of TestSoak (0: duration/60, at least 5s)")
	flagSoakWarmup   = flag.Duration("soak.warmup", 0, "samples TestSoak leaves out of the flatness checks (0: duration/8)")
)

// soakSource is one soak object: a testkit_file and a built-in terraform_data whose content is
// the binding rev, so an update of rev is a new generation that changes both resources.
const soakSource = `(deflava-architecture soak-kit
  :inputs ((:dir "/tmp") (:rev "0"))
  :providers ((testkit :source "example/testkit"))
  :resources ((testkit-file "kit" :filename "{dir}/kit.txt" :content "{rev}\n")
              (terraform-data "marker" :input "{rev}")))
`

// Flatness thresholds of TestSoak (docs/operations.md, "Soak").
const (
	// soakRSSRatio bounds a service's median RSS in the last quarter of the measured samples
	// against its median in the first quarter.
	soakRSSRatio = 1.20
	// soakGoroutineSlack bounds the growth of a service's median goroutine count between the
	// first and last quarter: at most 10% plus this many.
	soakGoroutineSlack = 20
	// soakStoreRatio bounds a store's median size (bytes) and number of subject shapes in the
	// last quarter against the third quarter's: a store bounded by its limits (per-subject
	// history, KV history, TTL) or by a collection (the artifacts' age) has stopped growing by
	// then, one that grows without bound gains about 25-30% between the two in a 2h run.
	soakStoreRatio = 1.15
)

// soakName matches the soak's object names (soak-000 ...) inside a subject or KV key.
var soakName = regexp.MustCompile(`soak-[0-9]{3}`)

// soakSample is one row of TestSoak's tables.
type soakSample struct {
	at         time.Duration
	rss        map[string]float64 // process name -> bytes (process_resident_memory_bytes)
	anon       map[string]float64 // process name -> bytes of anonymous RSS (RssAnon, /proc/PID/status)
	goroutines map[string]float64 // process name -> go_goroutines
	stores     map[string]jetstream.StreamState
	shapes     map[string]int // store -> distinct subjects once the soak's names are replaced by "*"
	applied    int
	ops        int
}

// TestSoak churns -soak.objects LavaArchitectures (create, update of a binding, delete with the
// finalizer's destroy) for -soak.duration with drift scans every 30s (the shortest
// spec.driftInterval), every service its own process. Only objects that have settled (Applied at
// their generation, or gone) are touched, so the churn follows the pipeline's pace instead of
// piling up a backlog. Every -soak.sample it records each service's RSS and goroutines (from its
// /metrics) and every stream's, KV bucket's and object store's messages, bytes and subjects, and
// prints them as two tables at the end.
//
// Asserted, over the samples after -soak.warmup split into quarters:
//   - RSS: each service's last-quarter median is within soakRSSRatio of its first-quarter median;
//   - goroutines: each service's last-quarter median is at most 110% of its first-quarter median
//     plus soakGoroutineSlack;
//   - stores: LAVA_RECEIPTS (append-only by design, docs/architecture.md section 3) and
//     LAVA_ANOMALIES (30 days' age) are reported, not bounded. Every other stream, bucket and
//     object store has stopped growing: its last-quarter median bytes and subject shapes
//     (distinct subjects once the object names are replaced by "*": the churn reuses the same
//     names, so only a subject per generation, UID or artifact keeps growing) are within
//     soakStoreRatio of its third quarter's. The applier collects artifacts older than an hour,
//     so the object store is flat only in runs well over an hour (the 2h default);
//   - at the end every object present is Applied at its generation, every deleted object is
//     gone, every consumer drains and no service process died.
func TestSoak(t *testing.T) {
	dur, n := *flagSoakDuration, *flagSoakObjects
	sample := *flagSoakSample
	if sample <= 0 {
		sample = max(dur/60, 5*time.Second)
	}
	warmup := *flagSoakWarmup
	if warmup <= 0 {
		warmup = dur / 8
	}
	if dur/sample < 12 {
		t.Fatalf("-soak.duration %v with -soak.sample %v gives %d samples; the flatness checks need at least 12", dur, sample, dur/sample)
	}
	ctx, cancel := context.WithTimeout(t.Context(), dur+30*time.Minute)
	defer cancel()
	// The applier collects superseded artifacts every minute and keeps five minutes' worth, so
	// lava-artifacts reaches its steady size within the warm-up (the defaults, 10m and 1h,
	// would still be filling it in the first quarter of a two-hour run).
	env := harness.Start(t, harness.Options{TestkitMirror: true, Args: map[string][]string{
		bus.ServiceApplier: {"--artifact-collect-interval=1m", "--artifact-min-age=5m"}}})
	kc := newClient(t, env.Kubeconfig)
	js, err := jetstream.New(env.ConnectAs(t, bus.IdentityBootstrap))
	if err != nil {
		t.Fatal(err)
	}
	const ns = "soak"
	if err := kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	root := env.Files(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 12))
	rev := make([]int, n)
	name := func(i int) string { return fmt.Sprintf("soak-%03d", i) }
	create := func(i int) error {
		dir := filepath.Join(root, name(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		rev[i]++
		return kc.Create(ctx, &v1alpha1.LavaArchitecture{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)},
			Spec: v1alpha1.LavaArchitectureSpec{
				Source:        v1alpha1.Source{Inline: soakSource},
				Bindings:      map[string]string{"dir": dir, "rev": strconv.Itoa(rev[i])},
				Engine:        v1alpha1.EngineEmbedded,
				DriftInterval: &metav1.Duration{Duration: 30 * time.Second},
			},
		})
	}
	for i := range n {
		if err := create(i); err != nil {
			t.Fatalf("create %s: %v", name(i), err)
		}
	}

	procs := harness.Services()
	var samples []soakSample
	ops := map[string]int{}
	take := func(at time.Duration, applied int) {
		s := soakSample{at: at, rss: map[string]float64{}, anon: map[string]float64{}, goroutines: map[string]float64{}, stores: map[string]jetstream.StreamState{},
			shapes: map[string]int{}, applied: applied, ops: ops["create"] + ops["update"] + ops["delete"]}
		for _, p := range procs {
			for metric, into := range map[string]map[string]float64{"process_resident_memory_bytes": s.rss, "go_goroutines": s.goroutines} {
				v, err := metricSum(ctx, env, p, metric, nil)
				if err != nil {
					t.Fatalf("sample %s: %v", p, err)
				}
				if v == 0 {
					t.Fatalf("sample %s: no %s in its /metrics", p, metric)
				}
				into[p] = v
			}
			pr, err := procfs.NewProc(env.Proc(p).PID())
			if err != nil {
				t.Fatalf("sample %s: %v", p, err)
			}
			st, err := pr.NewStatus()
			if err != nil {
				t.Fatalf("sample %s: %v", p, err)
			}
			s.anon[p] = float64(st.RssAnon)
		}
		for info := range js.ListStreams(ctx).Info() {
			s.stores[info.Config.Name] = info.State
			st, err := js.Stream(ctx, info.Config.Name)
			if err != nil {
				t.Fatalf("sample %s: %v", info.Config.Name, err)
			}
			full, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
			if err != nil {
				t.Fatalf("sample %s subjects: %v", info.Config.Name, err)
			}
			shapes := map[string]bool{}
			for subj := range full.State.Subjects {
				shapes[soakName.ReplaceAllString(subj, "*")] = true
			}
			s.shapes[info.Config.Name] = len(shapes)
		}
		samples = append(samples, s)
	}
	// settled reports, per index, whether the object is Applied at its generation or absent
	// (true, with exists false), and how many are Applied.
	type look struct{ settled, exists bool }
	failed := map[string]bool{} // name/generation reported Failed
	observe := func() ([]look, int, error) {
		var list v1alpha1.LavaArchitectureList
		if err := kc.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, 0, err
		}
		looks := make([]look, n)
		for i := range looks {
			looks[i].settled = true
		}
		applied := 0
		for _, la := range list.Items {
			i, err := strconv.Atoi(strings.TrimPrefix(la.Name, "soak-"))
			if err != nil || i >= n {
				continue
			}
			ok := la.DeletionTimestamp == nil && la.Status.Phase == v1alpha1.PhaseApplied && la.Status.ObservedGeneration == la.Generation
			looks[i] = look{settled: ok, exists: true}
			if ok {
				applied++
			}
			if la.Status.Phase == v1alpha1.PhaseFailed && la.Status.ObservedGeneration == la.Generation && !failed[la.Name+"/"+strconv.FormatInt(la.Generation, 10)] {
				failed[la.Name+"/"+strconv.FormatInt(la.Generation, 10)] = true
				t.Errorf("%s failed at generation %d: %s", la.Name, la.Generation, conditions(&la))
				looks[i].settled = false
			}
		}
		return looks, applied, nil
	}

	start := time.Now()
	nextSample := start
	for time.Since(start) < dur {
		if err := env.Dead(); err != nil {
			t.Fatal(err)
		}
		looks, applied, err := observe()
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(nextSample) {
			take(time.Since(start), applied)
			nextSample = nextSample.Add(sample)
		}
		// One operation on a random settled object per 200ms tick.
		var ready []int
		for i, l := range looks {
			if l.settled {
				ready = append(ready, i)
			}
		}
		if len(ready) > 0 {
			i := ready[rng.IntN(len(ready))]
			key := types.NamespacedName{Namespace: ns, Name: name(i)}
			switch r := rng.Float64(); {
			case !looks[i].exists:
				err = create(i)
				ops["create"]++
			case r < 0.8:
				la := &v1alpha1.LavaArchitecture{}
				if err = kc.Get(ctx, key, la); err == nil {
					rev[i]++
					la.Spec.Bindings["rev"] = strconv.Itoa(rev[i])
					err = kc.Update(ctx, la)
				}
				ops["update"]++
			default:
				err = kc.Delete(ctx, &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}})
				ops["delete"]++
			}
			if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("%s: %v", name(i), err)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("churn over after %v: %d creates, %d updates, %d deletes on %d names", time.Since(start).Round(time.Second),
		ops["create"], ops["update"], ops["delete"], n)

	// Everything settles: present objects Applied, deleted ones gone (the finalizer's destroy ran).
	poll(ctx, t, env, 15*time.Minute, func() (bool, string) {
		looks, applied, err := observe()
		if err != nil {
			return false, err.Error()
		}
		waiting := 0
		for _, l := range looks {
			if !l.settled {
				waiting++
			}
		}
		return waiting == 0, fmt.Sprintf("%d objects Applied, %d not settled", applied, waiting)
	})
	_, applied, _ := observe()
	take(time.Since(start), applied)
	poll(ctx, t, env, 5*time.Minute, func() (bool, string) {
		var stuck []string
		for info := range js.ListStreams(ctx).Info() {
			s, err := js.Stream(ctx, info.Config.Name)
			if err != nil {
				return false, err.Error()
			}
			for ci := range s.ListConsumers(ctx).Info() {
				if ci.NumPending != 0 || ci.NumAckPending != 0 {
					stuck = append(stuck, fmt.Sprintf("%s/%s pending %d, unacked %d", info.Config.Name, ci.Name, ci.NumPending, ci.NumAckPending))
				}
			}
		}
		return len(stuck) == 0, "consumers not drained: " + strings.Join(stuck, "; ")
	})
	if err := env.Dead(); err != nil {
		t.Errorf("a process died during the soak: %v", err)
	}

	t.Log("\n" + soakServiceTable(samples, procs))
	t.Log("\n" + soakStoreTable(samples))
	checkSoakFlat(ctx, t, samples, procs, warmup, js)
}

// soakQuarters splits the samples taken after warmup into four quarters.
func soakQuarters(samples []soakSample, warmup time.Duration) [4][]soakSample {
	var measured []soakSample
	for _, s := range samples {
		if s.at >= warmup {
			measured = append(measured, s)
		}
	}
	var q [4][]soakSample
	n := len(measured) / 4
	for i := range q {
		q[i] = measured[i*n : (i+1)*n]
	}
	q[3] = measured[len(measured)-n:]
	return q
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func column(samples []soakSample, f func(soakSample) float64) []float64 {
	out := make([]float64, len(samples))
	for i, s := range samples {
		out[i] = f(s)
	}
	return out
}

// checkSoakFlat asserts TestSoak's flatness and bounds (its doc comment) and logs each figure.
func checkSoakFlat(ctx context.Context, t *testing.T, samples []soakSample, procs []string, warmup time.Duration, js jetstream.JetStream) {
	t.Helper()
	q := soakQuarters(samples, warmup)
	first, third, last := q[0], q[2], q[3]
	if len(first) < 3 {
		t.Fatalf("%d samples after the %v warm-up: too few for the flatness checks", len(samples), warmup)
	}
	for _, p := range procs {
		r1 := median(column(first, func(s soakSample) float64 { return s.rss[p] }))
		r4 := median(column(last, func(s soakSample) float64 { return s.rss[p] }))
		g1 := median(column(first, func(s soakSample) float64 { return s.goroutines[p] }))
		g4 := median(column(last, func(s soakSample) float64 { return s.goroutines[p] }))
		a1 := median(column(first, func(s soakSample) float64 { return s.anon[p] }))
		a4 := median(column(last, func(s soakSample) float64 { return s.anon[p] }))
		t.Logf("flatness %-8s RSS median %6.1f -> %6.1f MiB (x%.2f), anonymous %6.1f -> %6.1f MiB (x%.2f), goroutines median %5.0f -> %5.0f",
			p, r1/(1<<20), r4/(1<<20), r4/r1, a1/(1<<20), a4/(1<<20), a4/a1, g1, g4)
		if r4 > soakRSSRatio*r1 {
			t.Errorf("%s: RSS grew from a median of %.1f MiB to %.1f MiB (x%.2f > x%.2f)", p, r1/(1<<20), r4/(1<<20), r4/r1, soakRSSRatio)
		}
		if g4 > 1.1*g1+soakGoroutineSlack {
			t.Errorf("%s: goroutines grew from a median of %.0f to %.0f (bound 110%% + %d)", p, g1, g4, soakGoroutineSlack)
		}
	}
	for name := range samples[len(samples)-1].stores {
		size := func(s soakSample) float64 { return float64(s.stores[name].Bytes) }
		subjects := func(s soakSample) float64 { return float64(s.stores[name].NumSubjects) }
		shapes := func(s soakSample) float64 { return float64(s.shapes[name]) }
		b3, b4 := median(column(third, size)), median(column(last, size))
		s3, s4 := median(column(third, subjects)), median(column(last, subjects))
		k3, k4 := median(column(third, shapes)), median(column(last, shapes))
		t.Logf("store %-28s third -> last quarter: bytes median %10.0f -> %10.0f, subjects %6.0f -> %6.0f, subject shapes %6.0f -> %6.0f",
			name, b3, b4, s3, s4, k3, k4)
		if name == bus.StreamReceipts || name == bus.StreamAnomalies {
			continue
		}
		if k4 > soakStoreRatio*max(k3, 1) {
			t.Errorf("%s: distinct subjects with the object names replaced grew from a median of %.0f to %.0f on the same %d names (x%.2f > x%.2f): still growing at the end",
				name, k3, k4, *flagSoakObjects, k4/max(k3, 1), soakStoreRatio)
		}
		if b4 > soakStoreRatio*max(b3, 1<<16) {
			t.Errorf("%s: bytes grew from a median of %.0f to %.0f (x%.2f > x%.2f): still growing at the end",
				name, b3, b4, b4/max(b3, 1), soakStoreRatio)
		}
	}
}

// soakServiceTable prints one row per sample: RSS and anonymous RSS (MiB) and goroutines of
// every service.
func soakServiceTable(samples []soakSample, procs []string) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprint(w, "t\tapplied\tops\t")
	for _, p := range procs {
		fmt.Fprintf(w, "%s MiB\tanon\t%s gor\t", p, p)
	}
	fmt.Fprintln(w)
	for _, s := range samples {
		fmt.Fprintf(w, "%s\t%d\t%d\t", s.at.Round(time.Second), s.applied, s.ops)
		for _, p := range procs {
			fmt.Fprintf(w, "%.1f\t%.1f\t%.0f\t", s.rss[p]/(1<<20), s.anon[p]/(1<<20), s.goroutines[p])
		}
		fmt.Fprintln(w)
	}
	_ = w.Flush()
	return b.String()
}

// soakStoreTable prints one row per sample: every store's bytes (KiB), subjects and subject
// shapes.
func soakStoreTable(samples []soakSample) string {
	var names []string
	for _, s := range samples {
		for n := range s.stores {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprint(w, "t\t")
	for _, n := range names {
		fmt.Fprintf(w, "%s KiB/subj/shapes\t", n)
	}
	fmt.Fprintln(w)
	for _, s := range samples {
		fmt.Fprintf(w, "%s\t", s.at.Round(time.Second))
		for _, n := range names {
			st := s.stores[n]
			fmt.Fprintf(w, "%d/%d/%d\t", st.Bytes/1024, st.NumSubjects, s.shapes[n])
		}
		fmt.Fprintln(w)
	}
	_ = w.Flush()
	return b.String()
}
