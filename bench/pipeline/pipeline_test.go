//go:build integration

package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/test/e2e/harness"
)

// EnvN overrides the default of -n.
const EnvN = "LAVA_PIPELINE_N"

// smokeN is N under the one-iteration smoke (-benchtime=1x) when neither -n nor $LAVA_PIPELINE_N
// says otherwise: the CI-sized run, whose targets are asserted (see [BenchmarkPipeline]).
const smokeN = 100

var (
	flagN       = flag.Int("n", defaultN(), "LavaArchitectures to create (default 1000, or $"+EnvN+"; 100 under -benchtime=1x unless set)")
	flagQPS     = flag.Float64("qps", -1, "Kubernetes API client QPS of the benchmark, the floor and Lava's services (--kube-api-qps); negative: unlimited")
	flagBurst   = flag.Int("burst", 100, "Kubernetes API client burst of the benchmark, the floor and Lava's services (--kube-api-burst)")
	flagWorkers = flag.Int("workers", 16, "goroutines issuing the creates, and the floor controller's workers")
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

// restConfig is the kubeconfig's configuration with the benchmark's QPS and burst (the same
// the services get as --kube-api-qps and --kube-api-burst).
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
	// created and applied are when each object's create answered and when it was first seen
	// Applied.
	created, applied map[string]time.Time
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

// run creates n objects in ns in one burst and waits for every one to be Applied (status for
// its generation), watching them: the same measurement for Lava and the floor. Latency: from
// the create's response to the first watch event showing Applied.
func run(ctx context.Context, dc dynamic.Interface, ns string, n int) (result, error) {
	ri := dc.Resource(gvr).Namespace(ns)
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
			o := object(ns, i)
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
	return result{total: last.Sub(start), p50: percentile(lat, 0.50), p99: percentile(lat, 0.99),
		created: maps.Clone(created), applied: maps.Clone(applied)}, nil
}

func first(m map[string]string) string {
	for k, v := range m {
		return k + ": " + v
	}
	return "none"
}

// floorController is the floor's operator: a bare client-go program with its own client (an
// informer and a work queue, as any client-go controller) that, for every new object in ns, adds
// a finalizer and patches the status once to Applied: 2 writes per object (3 with the create),
// the least an operator with a finalizer that reports a result must do. Its cache has synced
// when it returns; the returned func runs the workers until ctx is done.
func floorController(ctx context.Context, dc dynamic.Interface, ns string) (func() error, error) {
	ri := dc.Resource(gvr).Namespace(ns)
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, ns, nil)
	inf := f.ForResource(gvr).Informer()
	q := workqueue.NewTyped[string]()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			q.Add(u.GetName())
		}
	}}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, errors.New("floor: informer did not sync")
	}
	return func() error {
		go func() { <-ctx.Done(); q.ShutDown() }()
		g, gctx := errgroup.WithContext(ctx)
		for range *flagWorkers {
			g.Go(func() error {
				for {
					name, shutdown := q.Get()
					if shutdown {
						return nil
					}
					err := floorReconcile(gctx, ri, name)
					q.Done(name)
					if err != nil {
						return err
					}
				}
			})
		}
		err := g.Wait()
		f.Shutdown()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}, nil
}

// floorReconcile adds the finalizer to name and patches its status to Applied.
func floorReconcile(ctx context.Context, ri dynamic.ResourceInterface, name string) error {
	fin := []byte(`{"metadata":{"finalizers":["lava.pleme.io/finalizer"]}}`)
	if _, err := ri.Patch(ctx, name, types.MergePatchType, fin, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("floor finalizer %s: %w", name, err)
	}
	st := []byte(`{"status":{"phase":"Applied","observedGeneration":1}}`)
	if _, err := ri.Patch(ctx, name, types.MergePatchType, st, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("floor status %s: %w", name, err)
	}
	return nil
}

// usage is what the processes of one side used: API requests by resource (counters of the API
// server, each a running total), CPU seconds by process.
type usage struct {
	writes map[string]float64 // resource -> POST, PUT and PATCH requests the API server served
	// rejected is the part of writes answered with a 4xx code (409 Conflict: a stale
	// resourceVersion under an optimistic lock): requests the server paid for that wrote nothing.
	rejected map[string]float64
	reads    map[string]float64 // resource -> GET and LIST requests
	// watchEvents is resource -> watch events the API server sent to its watchers
	// (apiserver_watch_events_total), watchBytes their size in bytes (the sum of the
	// apiserver_watch_events_sizes histogram).
	watchEvents, watchBytes map[string]float64
	// bodyBytes is "resource verb" (verb create, update, patch, delete...) -> request body bytes
	// the API server read (the sum of the apiserver_request_body_size_bytes histogram). That
	// metric has no subresource label: a status write counts as a write of its resource.
	bodyBytes map[string]float64
	cpu       map[string]float64 // process -> user+system CPU seconds
}

// measured names the processes whose CPU is measured beside the services (named as the harness
// names them): the API server's two processes, the harness's nats-server, and this process (the
// benchmark's client and watch on both sides, the floor's controller on the floor's).
const (
	procAPIServer = "kube-apiserver"
	procEtcd      = "etcd"
	procNATS      = "nats-server"
	procBench     = "benchmark"
)

// The API server's metrics that [snapshot] reads.
const (
	metricRequests    = "apiserver_request_total"
	metricWatchEvents = "apiserver_watch_events_total"
	metricWatchSizes  = "apiserver_watch_events_sizes"
	metricBodySizes   = "apiserver_request_body_size_bytes"
)

// snapshot reads the API server's request and watch counters ([usage]) and the CPU time of every
// process. A metric missing from the API server's /metrics is an error.
func snapshot(ctx context.Context, env *harness.Env, rc rest.Interface, services []string) (usage, error) {
	u := usage{writes: map[string]float64{}, rejected: map[string]float64{}, reads: map[string]float64{},
		watchEvents: map[string]float64{}, watchBytes: map[string]float64{}, bodyBytes: map[string]float64{}, cpu: map[string]float64{}}
	body, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return u, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return u, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	for _, name := range []string{metricRequests, metricWatchEvents, metricWatchSizes, metricBodySizes} {
		if _, ok := families[name]; !ok {
			return u, fmt.Errorf("kube-apiserver /metrics: no %s", name)
		}
	}
	for _, m := range families[metricWatchEvents].GetMetric() {
		u.watchEvents[labelsOf(m)["resource"]] += m.GetCounter().GetValue()
	}
	for _, m := range families[metricWatchSizes].GetMetric() {
		u.watchBytes[labelsOf(m)["resource"]] += m.GetHistogram().GetSampleSum()
	}
	for _, m := range families[metricBodySizes].GetMetric() {
		labels := labelsOf(m)
		u.bodyBytes[labels["resource"]+" "+labels["verb"]] += m.GetHistogram().GetSampleSum()
	}
	for _, m := range families[metricRequests].GetMetric() {
		labels := labelsOf(m)
		r := labels["resource"]
		if labels["subresource"] != "" {
			r += "/" + labels["subresource"]
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY":
			u.writes[r] += m.GetCounter().GetValue()
			if strings.HasPrefix(labels["code"], "4") {
				u.rejected[r+" "+labels["code"]] += m.GetCounter().GetValue()
			}
		case "GET", "LIST":
			u.reads[r] += m.GetCounter().GetValue()
		}
	}
	pids := map[string]int{}
	for _, s := range services {
		pids[s] = env.Proc(s).PID()
	}
	for name, file := range map[string]string{procAPIServer: "apiserver.pid", procEtcd: "etcd.pid"} {
		b, err := os.ReadFile(filepath.Join(env.Dir, "kube", file))
		if err != nil {
			return u, err
		}
		if pids[name], err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return u, fmt.Errorf("%s: %w", file, err)
		}
	}
	pids[procBench] = os.Getpid()
	for name, pid := range pids {
		if u.cpu[name], err = cpuSeconds(pid); err != nil {
			return u, err
		}
	}
	for _, s := range env.NATS.Nodes {
		c, err := cpuSeconds(s.PID())
		if err != nil {
			return u, fmt.Errorf("%s %s: %w", procNATS, s.Name(), err)
		}
		u.cpu[procNATS] += c
	}
	return u, nil
}

// labelsOf is a metric's labels, name -> value.
func labelsOf(m *dto.Metric) map[string]string {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

// cpuSeconds is a process's user+system CPU time (fields 14 and 15 of /proc/PID/stat, in
// clock ticks of 1/100 s, the USER_HZ of Linux on every architecture Go supports).
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: split after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return (ut + st) / 100, nil
}

// sub is after minus before.
func sub(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		out[k] = v - before[k]
	}
	return out
}

func sum(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// settle is how long a side's writes may trail its last Applied (Kubernetes Events are sent
// asynchronously) before they are counted.
const settle = 2 * time.Second

// BenchmarkPipeline: one iteration is one whole run (N objects through Lava, then the floor).
// Reported: lava-total-s, lava-p50-s, lava-p99-s, floor-total-s, floor-p50-s, floor-p99-s, ratio
// (Lava's total over the floor's), writes/object (API writes beyond the benchmark's creates),
// CPU seconds per object per process, the whole-system CPU per object of each side and cpu-ratio
// (Lava's over the floor's: [cost]), watch events, watch event bytes and request body bytes per
// object, peak RSS per service. Asserted: writes per object at most 4 on every run; with N < 1000
// (the CI-sized run, N=100) the ratio at most ciRatioGuard (target 2, logged) and cpu-ratio at
// most cpuRatioGuard (target 2, logged); with N >= 1000 the ratio at most 1.5 and Lava's p99 at
// most 1.5 times the floor's total; with N >= 1000 and unlimited QPS cpu-ratio at most 2; with
// N >= 5000 the watcher's peak RSS at most 200 MiB (watcherRSSTarget); with N >= 10000 at the
// chart's default QPS and burst (50/100) the ratio at most 1.15.
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
	kubeArgs := []string{"--kube-api-qps", strconv.FormatFloat(*flagQPS, 'f', -1, 64), "--kube-api-burst", strconv.Itoa(*flagBurst)}
	env := harness.Start(b, harness.Options{Services: services, Args: map[string][]string{
		// The floor's namespace is not the watcher's: its objects are only the floor's.
		harness.Watcher: append([]string{"--namespaces", lavaNS}, kubeArgs...),
		harness.Synth:   kubeArgs, harness.Applier: kubeArgs, harness.Anomaly: kubeArgs,
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
	floorDC, err := dynamic.NewForConfig(rest.CopyConfig(cfg)) // the floor operator's own client
	if err != nil {
		b.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	rc := kc.CoreV1().RESTClient()
	for b.Loop() {
		u0, err := snapshot(ctx, env, rc, services)
		if err != nil {
			b.Fatal(err)
		}
		lava, err := run(ctx, dc, lavaNS, n)
		if err != nil {
			b.Fatalf("lava: %v", errors.Join(err, env.Dead()))
		}
		time.Sleep(settle)
		u1, err := snapshot(ctx, env, rc, services)
		if err != nil {
			b.Fatal(err)
		}
		fctx, stopFloor := context.WithCancel(ctx)
		floorRun, err := floorController(fctx, floorDC, floorNS)
		if err != nil {
			b.Fatalf("floor controller: %v", err)
		}
		floorDone := make(chan error, 1)
		go func() {
			err := floorRun()
			if err != nil {
				stopFloor() // ends the floor's run below too
			}
			floorDone <- err
		}()
		floor, err := run(fctx, dc, floorNS, n)
		if err != nil {
			stopFloor()
			b.Fatalf("floor: %v", errors.Join(err, <-floorDone))
		}
		time.Sleep(settle)
		stopFloor()
		if err := <-floorDone; err != nil {
			b.Fatalf("floor controller: %v", err)
		}
		u2, err := snapshot(ctx, env, rc, services)
		if err != nil {
			b.Fatal(err)
		}

		hop, err := hops(ctx, env.ConnectAs(b, "bootstrap"), lavaNS, lava)
		if err != nil {
			b.Fatalf("per-hop latency: %v", err)
		}
		lavaWrites, floorWrites := withoutLeases(sub(u1.writes, u0.writes)), withoutLeases(sub(u2.writes, u1.writes))
		// The benchmark's own creates are the same on both sides; the rest is the operator's.
		lavaPer := (sum(lavaWrites) - float64(n)) / float64(n)
		floorPer := (sum(floorWrites) - float64(n)) / float64(n)
		ratio := lava.total.Seconds() / floor.total.Seconds()
		b.ReportMetric(lava.total.Seconds(), "lava-total-s")
		b.ReportMetric(lava.p50.Seconds(), "lava-p50-s")
		b.ReportMetric(lava.p99.Seconds(), "lava-p99-s")
		b.ReportMetric(floor.total.Seconds(), "floor-total-s")
		b.ReportMetric(floor.p50.Seconds(), "floor-p50-s")
		b.ReportMetric(floor.p99.Seconds(), "floor-p99-s")
		b.ReportMetric(ratio, "ratio")
		b.ReportMetric(lavaPer, "writes/object")
		b.ReportMetric(floorPer, "floor-writes/object")
		qps := fmt.Sprintf("QPS %.0f burst %d", *flagQPS, *flagBurst)
		if *flagQPS < 0 {
			qps = "unlimited QPS"
		}
		fmt.Printf("pipeline: N=%d, %s (benchmark, floor and services), %d create workers\n", n, qps, *flagWorkers)
		fmt.Printf("  lava : total %v, create->Applied p50 %v p99 %v\n", lava.total.Round(time.Millisecond), lava.p50.Round(time.Millisecond), lava.p99.Round(time.Millisecond))
		fmt.Printf("  floor: total %v, create->Applied p50 %v p99 %v (create; finalizer + 1 status patch by a second client)\n", floor.total.Round(time.Millisecond), floor.p50.Round(time.Millisecond), floor.p99.Round(time.Millisecond))
		fmt.Printf("  ratio lava/floor %.2f; lava p99 / floor total %.2f\n", ratio, lava.p99.Seconds()/floor.total.Seconds())
		fmt.Printf("  API writes per object beyond the create: lava %.2f %v, floor %.2f %v\n", lavaPer, perObject(lavaWrites, n, "%.2f"), floorPer, perObject(floorWrites, n, "%.2f"))
		fmt.Printf("  of which rejected (4xx, by resource and code): lava %v, floor %v\n", perObject(sub(u1.rejected, u0.rejected), n, "%.2f"), perObject(sub(u2.rejected, u1.rejected), n, "%.2f"))
		fmt.Printf("  API reads (GET, LIST) per object: lava %v, floor %v\n", perObject(sub(u1.reads, u0.reads), n, "%.2f"), perObject(sub(u2.reads, u1.reads), n, "%.2f"))
		for _, h := range hopList {
			fmt.Printf("  hop %-42s p50 %v p99 %v\n", h.name, hop[h.name][0].Round(time.Millisecond), hop[h.name][1].Round(time.Millisecond))
		}
		cpuRatio := cost(b, n, services, u0, u1, u2)
		var rss []string
		for _, s := range services {
			v, err := env.PeakRSS(s)
			if err != nil {
				b.Fatal(err)
			}
			if s == "watcher" && n >= 5000 && v > watcherRSSTarget {
				b.Errorf("N=%d: the watcher's peak RSS is %.0f MiB: the target is at most %d MiB", n, float64(v)/(1<<20), watcherRSSTarget>>20)
			}
			b.ReportMetric(float64(v)/(1<<20), s+"-rss-MB")
			rss = append(rss, fmt.Sprintf("%s %.0f", s, float64(v)/(1<<20)))
		}
		fmt.Printf("  peak RSS MB: %s\n", strings.Join(rss, ", "))

		if lavaPer > 4 {
			b.Errorf("Lava made %.2f API writes per object from create to Applied: the target is at most 4", lavaPer)
		}
		// The chart's default client rate limit (deploy/charts/lava/values.yaml kubeAPI, the
		// services' defaults).
		chartQPS := *flagQPS == svc.DefaultKubeAPIQPS && *flagBurst == svc.DefaultKubeAPIBurst
		switch {
		case n < 1000 && ratio > ciRatioGuard:
			b.Errorf("N=%d: Lava's total %v is %.2f times the floor's %v: more than the regression guard %.0f (target %.0f)", n, lava.total, ratio, floor.total, ciRatioGuard, ciRatioTarget)
		case n < 1000 && ratio > ciRatioTarget:
			// The CI-sized target is not reliably met (bench/README.md has the figures): the
			// run reports it on every run and fails only past the guard, so a regression from
			// the recorded figures still fails make test.
			fmt.Printf("  NOT MET: N=%d ratio %.2f, the target is at most %.0f (guard %.0f)\n", n, ratio, ciRatioTarget, ciRatioGuard)
		case n >= scaleN && chartQPS && ratio > scaleRatioTarget:
			b.Errorf("N=%d at the chart's QPS %d/%d: Lava's total %v is %.2f times the floor's %v: the target is at most %.2f", n, svc.DefaultKubeAPIQPS, svc.DefaultKubeAPIBurst, lava.total, ratio, floor.total, scaleRatioTarget)
		case n >= 1000 && ratio > 1.5:
			b.Errorf("N=%d: Lava's total %v is %.2f times the floor's %v: the target is at most 1.5", n, lava.total, ratio, floor.total)
		}
		if n >= 1000 && lava.p99.Seconds() > 1.5*floor.total.Seconds() {
			b.Errorf("N=%d: Lava's p99 create->Applied %v is more than 1.5 times the floor's total %v", n, lava.p99, floor.total)
		}
		switch {
		case n < 1000 && cpuRatio > cpuRatioGuard:
			b.Errorf("N=%d: Lava's whole-system CPU per object is %.2f times the floor's: more than the regression guard %.0f (target %.0f)", n, cpuRatio, cpuRatioGuard, cpuRatioTarget)
		case n >= 1000 && *flagQPS < 0 && cpuRatio > cpuRatioTarget:
			b.Errorf("NOT MET: N=%d, unlimited QPS: Lava's whole-system CPU per object is %.2f times the floor's: the target is at most %.0f", n, cpuRatio, cpuRatioTarget)
		case cpuRatio > cpuRatioTarget:
			// Asserted only at N >= 1000 with unlimited QPS; elsewhere reported (and guarded
			// below N=1000).
			fmt.Printf("  NOT MET: N=%d cpu-ratio %.2f, the target is at most %.0f (guard %.0f below N=1000)\n", n, cpuRatio, cpuRatioTarget, cpuRatioGuard)
		}
	}
}

// ciRatioTarget is the target for the CI-sized run (N < 1000, unlimited QPS): Lava's total
// at most this many times the floor's. ciRatioGuard is the bound the run enforces until the target
// is met: the measured ratio on this 2-core machine was 4.7 to 5.5 under load and 7.3 on the idle
// CI machine, where the floor speeds up more than Lava (bench/README.md).
const (
	ciRatioTarget = 2.0
	ciRatioGuard  = 12.0
)

// cpuRatioTarget is the target on Lava's whole-system CPU per object over the floor's
// (cpu-ratio), asserted at N >= 1000 with unlimited QPS. cpuRatioGuard is the bound the CI-sized
// run (N < 1000) enforces: the recorded N=1000 figures without nats-server and the benchmark
// process were 33.6 ms against 9.8 ms, about 3.4 (bench/README.md).
const (
	cpuRatioTarget = 2.0
	cpuRatioGuard  = 8.0
)

// scaleN is the N from which Lava's total at the chart's default client rate limit must be at
// most scaleRatioTarget times the floor's.
const (
	scaleN           = 10000
	scaleRatioTarget = 1.15
)

// watcherRSSTarget is the bound on the watcher's peak RSS (VmHWM) at N >= 5000, in bytes.
const watcherRSSTarget = 200 << 20

// perObject formats a count per object by key (resource, or resource and verb or code), each
// value with format (e.g. "%.2f"), keys sorted, zeros left out.
func perObject(w map[string]float64, n int, format string) string {
	keys := slices.Sorted(maps.Keys(w))
	var parts []string
	for _, k := range keys {
		if w[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s "+format, k, w[k]/float64(n)))
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// withoutLeases drops, in place, the requests and watch events of Leases (key "leases", or
// "leases VERB"): leader election renews its Lease every few seconds whatever the load, not
// per object.
func withoutLeases(m map[string]float64) map[string]float64 {
	maps.DeleteFunc(m, func(k string, _ float64) bool { return k == "leases" || strings.HasPrefix(k, "leases ") })
	return m
}

// cost prints and reports what each side cost per object, and returns the whole-system CPU
// ratio (Lava's over the floor's): the CPU of every process (u0 to u1 is Lava's run, u1 to u2
// the floor's), and from the API server's counters the watch events it served, their bytes,
// and the request body bytes it read, by resource (Leases left out).
//
// The whole system is, on Lava's side, the services, kube-apiserver, etcd, nats-server and this
// process; on the floor's, kube-apiserver, etcd and this process. This process runs the same
// creating client and watch on both sides, and the floor's controller on the floor's: its CPU
// is counted on both sides, neither subtracted (its share on Lava's side is the client and
// watch alone).
func cost(b *testing.B, n int, services []string, u0, u1, u2 usage) float64 {
	per := func(v float64) float64 { return v / float64(n) }
	lavaCPU, floorCPU := sub(u1.cpu, u0.cpu), sub(u2.cpu, u1.cpu)
	lavaProcs := append(slices.Clone(services), procAPIServer, procEtcd, procNATS, procBench)
	floorProcs := []string{procAPIServer, procEtcd, procBench}
	var lavaAll, floorAll float64
	for _, p := range lavaProcs {
		lavaAll += lavaCPU[p]
		b.ReportMetric(per(lavaCPU[p]), p+"-cpu-s/object")
	}
	for _, p := range floorProcs {
		floorAll += floorCPU[p]
		b.ReportMetric(per(floorCPU[p]), "floor-"+p+"-cpu-s/object")
	}
	ratio := lavaAll / floorAll
	b.ReportMetric(1000*per(lavaAll), "cpu-ms/object")
	b.ReportMetric(1000*per(floorAll), "floor-cpu-ms/object")
	b.ReportMetric(ratio, "cpu-ratio")
	fmt.Printf("  CPU ms per object (lava run):  %s; whole system %.2f\n", cpuLine(lavaCPU, lavaProcs, n), 1000*per(lavaAll))
	fmt.Printf("  CPU ms per object (floor run): %s; whole system %.2f (benchmark: the floor controller and the client)\n", cpuLine(floorCPU, floorProcs, n), 1000*per(floorAll))
	fmt.Printf("  whole-system CPU per object lava/floor %.2f (the benchmark process on both sides)\n", ratio)

	lavaEv, floorEv := withoutLeases(sub(u1.watchEvents, u0.watchEvents)), withoutLeases(sub(u2.watchEvents, u1.watchEvents))
	lavaEvB, floorEvB := withoutLeases(sub(u1.watchBytes, u0.watchBytes)), withoutLeases(sub(u2.watchBytes, u1.watchBytes))
	lavaBody, floorBody := withoutLeases(sub(u1.bodyBytes, u0.bodyBytes)), withoutLeases(sub(u2.bodyBytes, u1.bodyBytes))
	// The benchmark's creates, the same objects on both sides; the rest is the operator's writes.
	create := gvr.Resource + " create"
	lavaWrote, floorWrote := per(sum(lavaBody)-lavaBody[create]), per(sum(floorBody)-floorBody[create])
	b.ReportMetric(per(sum(lavaEv)), "watch-events/object")
	b.ReportMetric(per(sum(floorEv)), "floor-watch-events/object")
	b.ReportMetric(per(sum(lavaEvB)), "watch-bytes/object")
	b.ReportMetric(per(sum(floorEvB)), "floor-watch-bytes/object")
	b.ReportMetric(lavaWrote, "write-bytes/object")
	b.ReportMetric(floorWrote, "floor-write-bytes/object")
	fmt.Printf("  API watch events served per object: lava %.2f %v, floor %.2f %v\n", per(sum(lavaEv)), perObject(lavaEv, n, "%.2f"), per(sum(floorEv)), perObject(floorEv, n, "%.2f"))
	fmt.Printf("  API watch event bytes per object: lava %.0f %v, floor %.0f %v\n", per(sum(lavaEvB)), perObject(lavaEvB, n, "%.0f"), per(sum(floorEvB)), perObject(floorEvB, n, "%.0f"))
	fmt.Printf("  API request body bytes per object beyond the create (by resource and verb, the create included; a status write is its resource's): lava %.0f %v, floor %.0f %v\n", lavaWrote, perObject(lavaBody, n, "%.0f"), floorWrote, perObject(floorBody, n, "%.0f"))
	return ratio
}

func cpuLine(cpu map[string]float64, procs []string, n int) string {
	var parts []string
	for _, p := range procs {
		parts = append(parts, fmt.Sprintf("%s %.2f", p, 1000*cpu[p]/float64(n)))
	}
	return strings.Join(parts, ", ")
}

// hop is one step of the pipeline, for per-hop latencies.
type hop struct {
	name     string
	from, to string // stream events ("created" and "seen Applied" are the benchmark's own times)
}

var hopList = []hop{
	{"watcher: create -> ResourceObserved", "created", bus.EventObserved},
	{"synth: ResourceObserved -> Synthesized", bus.EventObserved, bus.EventSynthesized},
	{"applier plan: Synthesized -> Planned", bus.EventSynthesized, bus.EventPlanned},
	{"applier apply: Planned -> Applied", bus.EventPlanned, bus.EventApplied},
	{"watcher: Applied -> status seen Applied", bus.EventApplied, "seen"},
}

// hops reads when each event of the objects in ns was stored (LAVA_RESOURCES and LAVA_PHASES)
// and returns the p50 and p99 of every hop in [hopList].
func hops(ctx context.Context, nc *nats.Conn, ns string, r result) (map[string][2]time.Duration, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	at := map[string]map[string]time.Time{} // object -> event -> first stored
	for name, t := range r.created {
		at[name] = map[string]time.Time{"created": t, "seen": r.applied[name]}
	}
	for stream, filter := range map[string]string{
		bus.StreamResources: bus.PrefixResource + bus.EscapeToken(ns) + ".>",
		bus.StreamPhases:    bus.PrefixPhase + bus.EscapeToken(ns) + ".>",
	} {
		c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", stream, err)
		}
		for {
			batch, err := c.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", stream, err)
			}
			n := 0
			for m := range batch.Messages() {
				n++
				md, err := m.Metadata()
				if err != nil {
					return nil, err
				}
				sub, err := bus.ParseSubject(m.Subject())
				if err != nil || at[sub.Name] == nil {
					continue
				}
				if _, seen := at[sub.Name][sub.Event]; !seen {
					at[sub.Name][sub.Event] = md.Timestamp
				}
			}
			if batch.Error() != nil && !errors.Is(batch.Error(), nats.ErrTimeout) {
				return nil, batch.Error()
			}
			if n == 0 {
				break
			}
		}
	}
	out := map[string][2]time.Duration{}
	for _, h := range hopList {
		var d []time.Duration
		for _, ev := range at {
			from, ok1 := ev[h.from]
			to, ok2 := ev[h.to]
			if ok1 && ok2 {
				d = append(d, to.Sub(from))
			}
		}
		out[h.name] = [2]time.Duration{percentile(d, 0.50), percentile(d, 0.99)}
	}
	return out, nil
}
