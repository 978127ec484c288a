package anomaly_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lava-operator/lava/internal/service/anomaly"
)

const routingYAML = `
window: 2m
cluster: prod-eu
sinks:
  - {name: pager, type: alertmanager, url: "http://am:9093"}
  - {name: ops, type: webhook, url: "http://hooks/lava", secretFile: /k}
  - {name: events, type: kubernetesEvents}
rules:
  - name: prod-critical
    match: {severities: [critical], namespaces: [prod], labels: {team: infra}}
    sinks: [pager, ops]
    continue: true
  - name: drift
    match: {kinds: [DriftDetected, cost_spike], minSeverity: functional}
    sinks: [ops]
  - name: everything
    sinks: [events]
`

func TestRouting_route(t *testing.T) {
	t.Parallel()
	r, err := anomaly.ParseRouting([]byte(routingYAML))
	if err != nil {
		t.Fatal(err)
	}
	if r.Window.Duration != 2*time.Minute || r.Cluster != "prod-eu" || r.Sinks[0].MaxAttempts != 5 || r.Sinks[0].ResolveAfter.Duration != 2*time.Minute ||
		r.StuckAfter.Duration != anomaly.DefaultStuckAfter {
		t.Fatalf("defaults: %+v", r)
	}
	a := func(kind anomaly.Kind, ext string, sev anomaly.Severity, ns string, labels map[string]string) anomaly.LavaAnomaly {
		return anomaly.LavaAnomaly{Kind: kind, ExtensionKind: ext, Severity: sev, Source: anomaly.Source{Namespace: ns, Name: "x"}, Labels: labels}
	}
	infra := map[string]string{"team": "infra"}
	tests := []struct {
		name string
		a    anomaly.LavaAnomaly
		want []string
	}{
		// The first rule continues, so the later ones still apply; "drift" stops.
		{"critical prod infra drift", a(anomaly.KindDriftDetected, "", anomaly.SeverityCritical, "prod", infra), []string{"pager", "ops"}},
		{"critical prod apply failure", a(anomaly.KindApplyFailure, "", anomaly.SeverityCritical, "prod", infra), []string{"pager", "ops", "events"}},
		{"critical prod, other team", a(anomaly.KindApplyFailure, "", anomaly.SeverityCritical, "prod", map[string]string{"team": "web"}), []string{"events"}},
		{"cosmetic drift", a(anomaly.KindDriftDetected, "", anomaly.SeverityCosmetic, "dev", nil), []string{"events"}},
		{"custom extension kind", a(anomaly.KindCustom, "cost_spike", anomaly.SeverityFunctional, "dev", nil), []string{"ops"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, r.Route(tt.a)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	if got := (&anomaly.Routing{}).Route(tests[0].a); len(got) != 0 {
		t.Errorf("no rules routes to %v", got)
	}
}

func TestRouting_invalid(t *testing.T) {
	t.Parallel()
	for name, y := range map[string]string{
		"unknown sink":     "sinks: [{name: a, type: webhook, url: http://x}]\nrules: [{sinks: [b]}]",
		"bus name":         "sinks: [{name: bus, type: webhook, url: http://x}]",
		"duplicate":        "sinks: [{name: a, type: kubernetesEvents}, {name: a, type: kubernetesEvents}]",
		"no url":           "sinks: [{name: a, type: alertmanager}]",
		"bad type":         "sinks: [{name: a, type: slack}]",
		"unknown field":    "sinkz: []",
		"bad severity":     "sinks: [{name: a, type: kubernetesEvents}]\nrules: [{match: {severities: [urgent]}, sinks: [a]}]",
		"rule without out": "rules: [{name: r}]",
	} {
		if _, err := anomaly.ParseRouting([]byte(y)); !errors.Is(err, anomaly.ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
}
