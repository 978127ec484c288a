package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/service/anomaly"
	"github.com/lava-operator/lava/internal/service/applier"
	"github.com/lava-operator/lava/internal/service/attest"
	"github.com/lava-operator/lava/internal/service/drift"
	"github.com/lava-operator/lava/internal/service/synth"
	"github.com/lava-operator/lava/internal/service/viggy"
	"github.com/lava-operator/lava/internal/service/watcher"
)

// exportedSeries registers the metrics of every service (as each service's New or NewMetrics
// does in production) on one registry and returns each metric name with its label names.
// Histograms also export <name>_bucket (with "le"), <name>_sum and <name>_count.
func exportedSeries(t *testing.T) map[string][]string {
	t.Helper()
	srv := natstest.RunJetStream(t)
	js := srv.JetStream()
	ctx := t.Context()
	if err := bus.EnsureTopology(ctx, js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err := bus.NewMetrics(reg)
	must("bus", err)
	_, err = watcher.NewMetrics(reg)
	must("watcher", err)
	_, err = anomaly.NewMetrics(reg)
	must("anomaly", err)
	_, err = attest.NewMetrics(reg)
	must("attest", err)
	_, err = synth.New(ctx, synth.Config{JS: js, BindingsKey: []byte(strings.Repeat("k", 32)), Registerer: reg})
	must("synth", err)
	set, err := engines.Open(ctx, js, engines.Options{Process: "monitoring-test"}, nil)
	must("engines", err)
	t.Cleanup(set.Close)
	_, err = applier.New(ctx, applier.Config{JS: js, Store: set.Store, Engines: set.Engines, Holder: "monitoring-test", Registerer: reg})
	must("applier", err)
	_, err = drift.New(ctx, drift.Config{JS: js, Engines: set.Engines, Holder: "monitoring-test", Registerer: reg})
	must("drift", err)
	_, err = viggy.New(ctx, viggy.Config{JS: js, Registerer: reg})
	must("viggy", err)

	descs := make(chan *prometheus.Desc, 256)
	go func() {
		reg.Describe(descs)
		close(descs)
	}()
	// Desc has no accessors; its String is `Desc{fqName: "x", help: "...", constLabels: {...},
	// variableLabels: {a,b}}`.
	nameRE := regexp.MustCompile(`fqName: "([^"]+)"`)
	varRE := regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	out := map[string][]string{}
	for d := range descs {
		s := d.String()
		m := nameRE.FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("cannot read a metric name from %s", s)
		}
		var labels []string
		if v := varRE.FindStringSubmatch(s); v != nil && v[1] != "" {
			labels = strings.Split(v[1], ",")
		}
		out[m[1]] = labels
		// Every Lava histogram measures seconds and is the only kind of metric named so
		// (Desc does not tell a histogram from a gauge).
		if strings.HasSuffix(m[1], "_seconds") {
			out[m[1]+"_bucket"] = append(slices.Clone(labels), "le")
			out[m[1]+"_sum"], out[m[1]+"_count"] = labels, labels
		}
	}
	if len(out) < 30 {
		t.Fatalf("only %d metrics registered: %v", len(out), out)
	}
	return out
}

// monitoringExprs are the PromQL expressions of the chart's alerting rules and dashboard, keyed
// by where they are.
func monitoringExprs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	b, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert] = r.Expr
		}
	}
	b, err = os.ReadFile(filepath.Join(chartDir, "files", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out["panel "+p.Title+" "+tg.RefID] = tg.Expr
		}
	}
	return out
}

// Labels every scraped series has (added by Prometheus, not by the services).
var targetLabels = []string{"job", "instance", "namespace", "pod", "service", "container", "endpoint"}

var (
	seriesRE  = regexp.MustCompile(`\b(lava_[a-z0-9_]+)(\{[^}]*\})?`)
	matcherRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	groupRE   = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// TestMonitoring_seriesAreExported: every series the alerting rules and the dashboard read is
// one a Lava service registers, every label they match or group by is one that series has, and
// the rules cover what docs/install.md promises (stalled and failing resources, stuck
// deletions, drift, consumer lag, receipt append failures).
func TestMonitoring_seriesAreExported(t *testing.T) {
	exported := exportedSeries(t)
	exprs := monitoringExprs(t)
	if len(exprs) < 20 {
		t.Fatalf("only %d expressions in alerts.yaml and dashboard.json", len(exprs))
	}
	used := map[string]bool{}
	for where, expr := range exprs {
		ms := seriesRE.FindAllStringSubmatch(expr, -1)
		if len(ms) == 0 {
			t.Errorf("%s: no Lava series in %q", where, expr)
			continue
		}
		known := slices.Clone(targetLabels)
		for _, m := range ms {
			labels, ok := exported[m[1]]
			if !ok {
				t.Errorf("%s: %s is not exported by any Lava service", where, m[1])
				continue
			}
			used[m[1]] = true
			known = append(known, labels...)
			for _, lm := range matcherRE.FindAllStringSubmatch(m[2], -1) {
				if !slices.Contains(labels, lm[1]) && !slices.Contains(targetLabels, lm[1]) {
					t.Errorf("%s: %s has no label %q (it has %v)", where, m[1], lm[1], labels)
				}
			}
		}
		for _, g := range groupRE.FindAllStringSubmatch(expr, -1) {
			for _, l := range strings.Split(g[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !slices.Contains(known, l) {
					t.Errorf("%s: groups by %q, a label none of its series has", where, l)
				}
			}
		}
	}
	for _, want := range []string{"alert LavaResourceStalled", "alert LavaApplyFailing", "alert LavaDeletionStuck",
		"alert LavaDriftDetected", "alert LavaConsumerLagging", "alert LavaReceiptAppendFailing"} {
		if _, ok := exprs[want]; !ok {
			t.Errorf("alerts.yaml has no %s", strings.TrimPrefix(want, "alert "))
		}
	}
	var unused []string
	for name := range exported {
		if !used[name] && !strings.HasSuffix(name, "_sum") && !strings.HasSuffix(name, "_count") {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	t.Logf("exported series neither alerted on nor charted: %v", unused)
}
