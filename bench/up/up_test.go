//go:build integration

package up_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
	"github.com/lava-operator/lava/test/e2e/harness"
)

// rounds is how many interleaved rounds (script, then lava up, alternating which goes first)
// one iteration runs; the medians are compared.
const rounds = 7

// wantRatio is the target, asserted: `lava up --once` takes at most the script's time.
const wantRatio = 1.0

// manifest is one LavaArchitecture of 20 resources, 10 terraform_data and 10 local_file under
// dir, on the embedded engine (the default of `make up`).
func manifest(dir string) string {
	return fmt.Sprintf(`apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata:
  name: twenty
  namespace: bench
spec:
  source:
    inline: |
      (deflava-architecture twenty
        :inputs ((:dir "/tmp") (:names ("a" "b" "c" "d" "e" "f" "g" "h" "i" "j")))
        :resources ((for-each ((i n) (enumerate names))
                      (terraform-data "d{i}" :input "d{i} {n}"))
                    (for-each ((i n) (enumerate names))
                      (local-file "f{i}" :filename "{dir}/f{i}.txt" :content "file {i} {n}\n"))))
  bindings:
    dir: %s
  engine: embedded
`, dir)
}

// BenchmarkUpOnce20 measures, in one run, the wall time of `lava up --once` (the built binary,
// a fresh state directory: start the embedded NATS server and every service, synthesize,
// plan, apply, write the status and receipts, stop) on [manifest] against
// [tofutest.ByHandScript]'s create (tofu init, plan -out, apply) on the same Terraform JSON in
// a fresh directory, both from process start to exit, both creating the 20 resources. The
// JSON the script applies is rendered by `lava render` before its timer starts. Each side
// runs [rounds] times interleaved; the medians are reported (lava-up-ms, script-create-ms,
// ratio) and the ratio must be at most [wantRatio].
func BenchmarkUpOnce20(b *testing.B) {
	tools := tofutest.Tofu(b)
	lava := harness.BuildLava(b, b.TempDir())
	cache := filepath.Join(b.TempDir(), "plugins")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		b.Fatal(err)
	}
	round := func(lavaFirst bool) (up, script time.Duration) {
		dir := b.TempDir()
		if lavaFirst {
			up = upOnce(b, lava, tools, dir)
			script = byHand(b, lava, tools, dir, cache)
		} else {
			script = byHand(b, lava, tools, dir, cache)
			up = upOnce(b, lava, tools, dir)
		}
		return up, script
	}
	round(false) // warm-up: the plugin cache, the page cache
	var ups, scripts []time.Duration
	for b.Loop() {
		for r := range rounds {
			u, s := round(r%2 == 1)
			ups, scripts = append(ups, u), append(scripts, s)
		}
	}
	up, script := median(ups), median(scripts)
	ratio := float64(up) / float64(script)
	b.ReportMetric(ms(up), "lava-up-ms")
	b.ReportMetric(ms(script), "script-create-ms")
	b.ReportMetric(ratio, "ratio")
	b.Logf("lava up --once %.0f ms, the script's create %.0f ms: %.2fx (target <= %.2f); every round: lava up %v, script %v",
		ms(up), ms(script), ratio, wantRatio, rounded(ups), rounded(scripts))
	if ratio > wantRatio {
		b.Errorf("lava up --once takes %.2fx the script's create (%.0f ms against %.0f ms), want <= %.2f", ratio, ms(up), ms(script), wantRatio)
	}
}

// upOnce runs `lava up --once` on [manifest] (files under dir/up) with a fresh state directory
// and returns its wall time; it fails b unless the run exits 0 with the resource Applied and
// the ten files written.
func upOnce(b *testing.B, lava string, tools tofutest.Tools, dir string) time.Duration {
	b.Helper()
	files := filepath.Join(dir, "up")
	m := filepath.Join(dir, "up.yaml")
	if err := os.WriteFile(m, []byte(manifest(files)), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.CommandContext(b.Context(), lava, "up", "--once", "-f", m, "--state-dir", filepath.Join(dir, "state"),
		"--providers", tools.Mirror, "--timeout", "2m", "--policy", rootsPolicy(b, dir, files))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil || !strings.Contains(string(out), "1 resource settled: 1 Applied") {
		b.Fatalf("lava up --once: %v\n%s", err, out)
	}
	written(b, files)
	return d
}

// byHand renders [manifest] (files under dir/script) with `lava render` into a fresh working
// directory, untimed, then returns the wall time of the script's create there.
func byHand(b *testing.B, lava string, tools tofutest.Tools, dir, cache string) time.Duration {
	b.Helper()
	files, ws := filepath.Join(dir, "script"), filepath.Join(dir, "ws")
	m := filepath.Join(dir, "script.yaml")
	if err := os.WriteFile(m, []byte(manifest(files)), 0o644); err != nil {
		b.Fatal(err)
	}
	doc, err := exec.CommandContext(b.Context(), lava, "render", "--policy", rootsPolicy(b, dir, files), m).Output()
	if err != nil {
		b.Fatalf("lava render: %v", err)
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "main.tf.json"), doc, 0o644); err != nil {
		b.Fatal(err)
	}
	d := tools.ByHand(b, "create", ws, cache)
	written(b, files)
	return d
}

// rootsPolicy writes dir/<base of root>-policy.yaml, a policy document letting the manifest's
// files be written under root only (fileWriteRoots), and returns its path.
func rootsPolicy(b *testing.B, dir, root string) string {
	b.Helper()
	p := filepath.Join(dir, filepath.Base(root)+"-policy.yaml")
	if err := os.WriteFile(p, []byte("cluster: {fileWriteRoots: ["+root+"]}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}

// written fails b unless dir holds the ten files of [manifest].
func written(b *testing.B, dir string) {
	b.Helper()
	for i := range 10 {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("f%d.txt", i))); err != nil {
			b.Fatalf("not applied: %v", err)
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func rounded(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
