//go:build integration

package chart

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// promtoolBin returns $LAVA_PROMTOOL_BIN, failing the test when it is not an executable.
func promtoolBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv("LAVA_PROMTOOL_BIN")
	if p == "" {
		t.Fatal("LAVA_PROMTOOL_BIN is not set: build promtool with `make tools-promtool` and run through make (or export LAVA_PROMTOOL_BIN=$HOME/.cache/lava/tools/promtool-v0.316.0/promtool)")
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("LAVA_PROMTOOL_BIN=%s is not an executable (make tools-promtool): %v", p, err)
	}
	return p
}

// TestMonitoring_promtool checks the alerting rules with promtool (`check rules`: syntax,
// PromQL, templates) and runs their unit tests (`test rules files/alerts_test.yaml`: each
// alert fires, with its labels and rendered annotations, exactly when the input series say it
// should).
func TestMonitoring_promtool(t *testing.T) {
	bin := promtoolBin(t)
	dir := filepath.Join(chartDir, "files")
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		} else {
			t.Logf("promtool %v:\n%s", args, out)
		}
	}
}
