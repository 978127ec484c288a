//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lava-operator/lava/test/e2e/harness"
)

// metricSum sums the samples of family name in a process's /metrics whose labels include want.
func metricSum(ctx context.Context, env *harness.Env, proc, name string, want map[string]string) (float64, error) {
	body, err := env.Metrics(ctx, proc)
	if err != nil {
		return 0, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	mf := families[name]
	if mf == nil {
		return 0, nil
	}
	sum := 0.0
next:
	for _, m := range mf.GetMetric() {
		for k, v := range want {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum, nil
}
