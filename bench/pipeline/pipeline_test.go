//go:build integration

package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/lava-operator/lava/test/e2e/harness"
)

// EnvN overrides the default of -n.
const EnvN = "LAVA_PIPELINE_N"

// smokeN is N under the one-iteration smoke (-benchtime=1x) when neither -n nor $LAVA_PIPELINE_N
// says otherwise: enough objects to exercise every path in about a minute.
const smokeN = 20

var (
	flagN       = flag.Int("n", defaultN(), "LavaArchitectures to create (default 1000, or $"+EnvN+"; 20 under -benchtime=1x unless set)")
	flagQPS     = flag.Float64("qps", 0, "client QPS of the benchmark's client and the floor (0: client-go's default, 5, as the watcher uses)")
	flagBurst   = flag.Int("burst", 0, "client burst (0: client-go's default, 10, as the watcher uses)")
	flagWorkers = flag.Int("workers", 16, "goroutines issuing the creates (and the floor's requests)")
	flagTimeout = flag.Duration("timeout", 60*time.Minute, "bound of the Lava run")
)

// objects is N: -n when given, else $LAVA_PIPELINE_N, else smokeN under -benchtime=1x, else 1000.
func objects() int {
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "n" })
	if explicit {
		return *flagN
	}
	if _, ok := os.LookupEnv(EnvN); !ok {
		if bt := flag.Lookup("test.benchtime"); bt != nil && bt.Value.String() == "1x" {
			return smokeN
		}
	}
	return *flagN
}

func defaultN() int {
	if v, err := strconv.Atoi(os.Getenv(EnvN)); err == nil && v > 0 {
		return v
	}
	return 1000
}

var gvr = schema.GroupVersionResource{Group: "lava.pleme.io", Version: "v1alpha1", Resource: "lavaarchitectures"}

const (
	lavaNS  = "bench"
	floorNS = "floor"
)

// object is LavaArchitecture i: three terraform_data resources, the embedded engine.
func object(ns string, i int) *unstructured.Unstructured {
	src := fmt.Sprintf(`(deflava-architecture bench-%d
  :inputs ((:v "%d"))
  :resources ((terraform-data "a" :input "a-{v}")
              (terraform-data "b" :input "b-{v}")
              (terraform-data "c" :input "c-{v}")))`, i, i)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "lava.pleme.io/v1alpha1",
		"kind":       "LavaArchitecture",
		"metadata":   map[string]any{"name": fmt.Sprintf("bench-%05d", i), "namespace": ns},
		"spec": map[string]any{
			"source":   map[string]any{"inline": src},
			"bindings": map[string]any{"v": strconv.Itoa(i)},
			"engine":   "embedded",
		},
	}}
}

// restConfig is the kubeconfig's configuration with the benchmark's QPS and burst (0 keeps
// client-go's defaults: 5 and 10, what the watcher runs with, as it sets neither).
func restConfig(b *testing.B, kubeconfig string) *rest.Config {
	b.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = float32(*flagQPS), *flagBurst
	return cfg
}

// result is one side's figures.
type result struct {
	total    time.Duration
	p50, p99 time.Duration
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// runLava creates n objects in one burst and waits for every one to be Applied (status for its
// generation), watching them. Latency: from the create's response to the first watch event
// showing Applied.
func runLava(ctx context.Context, dc dynamic.Interface, n int) (result, error) {
	ri := dc.Resource(gvr).Namespace(lavaNS)
	list, err := ri.List(ctx, metav1.ListOptions{})
	if err != nil {
		return result{}, err
	}
	var (
		mu      sync.Mutex
		created = map[string]time.Time{}
		applied = map[string]time.Time{}
		failed  = map[string]string{}
	)
	done := make(chan struct{})
	watchErr := make(chan error, 1)
	go func() {
		rv := list.GetResourceVersion()
		for {
			w, err := ri.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				watchErr <- err
				return
			}
			for ev := range w.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				rv = u.GetResourceVersion()
				if ev.Type != watch.Modified && ev.Type != watch.Added {
					continue
				}
				phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
				og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
				now := time.Now()
				mu.Lock()
				switch {
				case phase == "Applied" && og == u.GetGeneration():
					if _, seen := applied[u.GetName()]; !seen {
						applied[u.GetName()] = now
					}
				case phase == "Failed":
					failed[u.GetName()] = fmt.Sprint(u.Object["status"])
				}
				all := len(applied) == n
				mu.Unlock()
				if all {
					w.Stop()
					close(done)
					return
				}
			}
			if ctx.Err() != nil {
				watchErr <- ctx.Err()
				return
			}
		}
	}()

	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(*flagWorkers)
	for i := range n {
		g.Go(func() error {
			o := object(lavaNS, i)
			if _, err := ri.Create(gctx, o, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create %s: %w", o.GetName(), err)
			}
			t := time.Now()
			mu.Lock()
			created[o.GetName()] = t
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return result{}, err
	}
	select {
	case <-done:
	case err := <-watchErr:
		mu.Lock()
		defer mu.Unlock()
		return result{}, fmt.Errorf("%d of %d Applied, %d Failed (e.g. %v): %w", len(applied), n, len(failed), first(failed), err)
	}
	var lat []time.Duration
	last := start
	mu.Lock()
	defer mu.Unlock()
	for name, at := range applied {
		lat = append(lat, at.Sub(created[name]))
		if at.After(last) {
			last = at
		}
	}
	return result{total: last.Sub(start), p50: percentile(lat, 0.50), p99: percentile(lat, 0.99)}, nil
}

func first(m map[string]string) string {
	for k, v := range m {
		return k + ": " + v
	}
	return "none"
}

// runFloor is the floor: creates n objects and patches each one's status three times, the
// least any controller reporting three phases must do. Latency: create start to third patch.
func runFloor(ctx context.Context, dc dynamic.Interface, n int) (result, error) {
	ri := dc.Resource(gvr).Namespace(floorNS)
	lat := make([]time.Duration, n)
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(*flagWorkers)
	for i := range n {
		g.Go(func() error {
			t0 := time.Now()
			o := object(floorNS, i)
			if _, err := ri.Create(gctx, o, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("floor create %s: %w", o.GetName(), err)
			}
			for _, phase := range []string{"Synthesized", "Planned", "Applied"} {
				patch := fmt.Sprintf(`{"status":{"phase":%q,"observedGeneration":1}}`, phase)
				if _, err := ri.Patch(gctx, o.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
					return fmt.Errorf("floor patch %s: %w", o.GetName(), err)
				}
			}
			lat[i] = time.Since(t0)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return result{}, err
	}
	return result{total: time.Since(start), p50: percentile(lat, 0.50), p99: percentile(lat, 0.99)}, nil
}

// BenchmarkPipeline: one iteration is one whole run (N objects through Lava, then the floor).
// Reported: lava-total-s, lava-p50-s, lava-p99-s, floor-total-s, ratio (Lava's total over the
// floor's; target at most 3, checked when N >= 1000), watcher-rss-MB, applier-rss-MB (peak, VmHWM).
func BenchmarkPipeline(b *testing.B) {
	n := objects()
	// client-go's throttling notices would drown the figures.
	klog.SetLogger(logr.Discard())
	// Every service but drift, whose first scans (5m after each apply, the default interval)
	// are not part of create-to-Applied and would compete for the watcher's client.
	var services []string
	for _, s := range harness.Services() {
		if s != harness.Drift {
			services = append(services, s)
		}
	}
	env := harness.Start(b, harness.Options{Services: services, Args: map[string][]string{
		// The floor's namespace is not the watcher's: its objects are only the floor's.
		harness.Watcher: {"--namespaces", lavaNS},
	}})
	ctx, cancel := context.WithTimeout(b.Context(), *flagTimeout)
	defer cancel()
	for _, ns := range []string{lavaNS, floorNS} {
		if _, err := env.Kubectl(ctx, "", "create", "namespace", ns); err != nil {
			b.Fatal(err)
		}
	}
	cfg := restConfig(b, env.Kubeconfig)
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	qps, burst := cfg.QPS, cfg.Burst
	if qps == 0 {
		qps, burst = rest.DefaultQPS, rest.DefaultBurst
	}
	for b.Loop() {
		lava, err := runLava(ctx, dc, n)
		if err != nil {
			b.Fatalf("lava: %v", errors.Join(err, env.Dead()))
		}
		writes, err := watcherWrites(ctx, env)
		if err != nil {
			b.Fatal(err)
		}
		floor, err := runFloor(ctx, dc, n)
		if err != nil {
			b.Fatalf("floor: %v", err)
		}
		wRSS, err := env.PeakRSS(harness.Watcher)
		if err != nil {
			b.Fatal(err)
		}
		aRSS, err := env.PeakRSS(harness.Applier)
		if err != nil {
			b.Fatal(err)
		}
		ratio := lava.total.Seconds() / floor.total.Seconds()
		b.ReportMetric(lava.total.Seconds(), "lava-total-s")
		b.ReportMetric(lava.p50.Seconds(), "lava-p50-s")
		b.ReportMetric(lava.p99.Seconds(), "lava-p99-s")
		b.ReportMetric(floor.total.Seconds(), "floor-total-s")
		b.ReportMetric(ratio, "ratio")
		b.ReportMetric(writes/float64(n), "watcher-writes/object")
		b.ReportMetric(float64(wRSS)/(1<<20), "watcher-rss-MB")
		b.ReportMetric(float64(aRSS)/(1<<20), "applier-rss-MB")
		fmt.Printf("pipeline: N=%d, client QPS %.0f burst %d, %d create workers\n", n, qps, burst, *flagWorkers)
		fmt.Printf("  lava : total %v, create->Applied p50 %v p99 %v\n", lava.total.Round(time.Millisecond), lava.p50.Round(time.Millisecond), lava.p99.Round(time.Millisecond))
		fmt.Printf("  floor: total %v (create + 3 status patches each), p50 %v p99 %v\n", floor.total.Round(time.Millisecond), floor.p50.Round(time.Millisecond), floor.p99.Round(time.Millisecond))
		fmt.Printf("  watcher API writes (POST, PUT, PATCH) per object %.1f\n", writes/float64(n))
		fmt.Printf("  ratio lava/floor %.2f (target <= 3); peak RSS watcher %.0f MB, applier %.0f MB\n", ratio, float64(wRSS)/(1<<20), float64(aRSS)/(1<<20))
		// The target is about the full run; a smoke's few objects only show the run works.
		if ratio > 3 && n >= 1000 {
			b.Errorf("Lava's total %v is %.2f times the floor's %v: the target is at most 3", lava.total, ratio, floor.total)
		}
	}
}

// watcherWrites sums the watcher's client-go rest_client_requests_total for POST, PUT and PATCH
// (status patches, finalizer updates, Events, leader-election renewals).
func watcherWrites(ctx context.Context, env *harness.Env) (float64, error) {
	body, err := env.Metrics(ctx, harness.Watcher)
	if err != nil {
		return 0, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("watcher /metrics: %w", err)
	}
	mf, ok := families["rest_client_requests_total"]
	if !ok {
		return 0, errors.New("watcher /metrics: no rest_client_requests_total")
	}
	total := 0.0
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "method" && slices.Contains([]string{"POST", "PUT", "PATCH"}, l.GetValue()) {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total, nil
}
