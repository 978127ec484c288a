//go:build integration

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/up"
)

// previewManifest is a LavaArchitecture of one terraform_data whose input is version, on
// engine eng, with spec.approvePlan approve ("" for none).
func previewManifest(name, eng, version, approve string) string {
	s := fmt.Sprintf(`apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata:
  name: %s
  namespace: demo
spec:
  engine: %s
  source:
    inline: |
      (deflava-architecture %s
        :inputs ((:version "0"))
        :resources ((terraform-data "release" :input "{version}")))
  bindings:
    version: %q
`, name, eng, name, version)
	if approve != "" {
		s += "  approvePlan: " + approve + "\n"
	}
	return s
}

// previewResult is `lava plan --speculative --json`'s output.
type previewResult struct {
	PlanID  string            `json:"planId"`
	Verdict string            `json:"verdict"`
	Plan    engine.PlanRecord `json:"plan"`
	Review  json.RawMessage   `json:"review"`
}

// TestPlanSpeculative_workflow is the branch-preview workflow under `lava up`, on the embedded
// and the tofu engine: `lava plan --speculative` of a changed manifest prints the plan and its
// id and writes nothing (the object's status, plan and state serial stay); the manifest merged
// with spec.approvePlan set to that id is applied with exactly that plan; an id previewed
// against a state that moved since is refused (Failed, PlanSuperseded) and nothing is
// applied; a manifest that does not render is answered with lava validate's file:line:col
// diagnostics; a wrong token is refused.
func TestPlanSpeculative_workflow(t *testing.T) {
	tofuDir := os.Getenv("LAVA_TOFU_DIR")
	if tofuDir == "" {
		t.Fatal("LAVA_TOFU_DIR is not set: run `make tools-tofu` and the tests through make (or export LAVA_TOFU_DIR=~/.cache/lava/tools/tofu-v1.12.6)")
	}
	manifests := t.TempDir()
	stateDir := filepath.Join(t.TempDir(), "state")
	objects := map[string]string{"pv-embedded": "embedded", "pv-tofu": "tofu"}
	engines := map[string]string{"pv-new": "embedded", "pv-denied": "embedded", "pv-orphan": "embedded"}
	for n, e := range objects {
		engines[n] = e
	}
	write := func(t *testing.T, name, version, approve string) string {
		t.Helper()
		p := filepath.Join(manifests, name+".yaml")
		if err := os.WriteFile(p, []byte(previewManifest(name, objects[name], version, approve)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name := range objects {
		write(t, name, "1", "")
	}
	// One plan rule: a plan of pv-denied is denied.
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte("cluster:\n  planRules:\n    - name: no-pv-denied\n      plan: 'object.name == \"pv-denied\"'\n      verdict: deny\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startUp(t, "up", "-f", manifests, "--state-dir", stateDir, "--providers", filepath.Join(tofuDir, "providers"),
		"--interval", "200ms", "--policy", policyFile)
	waitFor := func(t *testing.T, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s\nlog:\n%s", what, readFile(t, filepath.Join(stateDir, up.FileLog)))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	at := func(t *testing.T, name string, gen int64, phase v1alpha1.Phase) func() bool {
		return func() bool {
			o, ok := object(t, stateDir, "demo", name)
			return ok && o.Generation == gen && o.Status.ObservedGeneration == gen && o.Status.Phase == phase
		}
	}
	for name := range objects {
		waitFor(t, name+" Applied at generation 1", at(t, name, 1, v1alpha1.PhaseApplied))
	}
	scratch := t.TempDir()
	preview := func(t *testing.T, name, version string) previewResult {
		t.Helper()
		p := filepath.Join(scratch, name+".yaml")
		if err := os.WriteFile(p, []byte(previewManifest(name, engines[name], version, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runLava(t, "", "plan", "--speculative", "-f", p, "--state-dir", stateDir, "--json")
		if code != exitOK {
			t.Fatalf("preview of %s %s: exit %d\nstdout:\n%s\nstderr:\n%s", name, version, code, out, errOut)
		}
		var r previewResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("preview of %s: %v\n%s", name, err, out)
		}
		return r
	}

	for name, eng := range objects {
		t.Run(eng, func(t *testing.T) {
			before, _ := object(t, stateDir, "demo", name)
			serials, _ := stateSerials(t, stateDir)
			p := preview(t, name, "2")
			if !engine.IsPlanID(p.PlanID) || p.Plan.PlanID != p.PlanID || p.Verdict != "allow" || p.Plan.Engine != eng ||
				p.Plan.Summary != (engine.Summary{Change: 1}) || !reviewUpdates(t, p.Review, "terraform_data.release", "2") {
				t.Fatalf("preview: %+v", p)
			}
			// The human form prints the same plan and the id to approve.
			code, out, _ := runLava(t, "", "plan", "--speculative", "-f", filepath.Join(scratch, name+".yaml"), "--state-dir", stateDir)
			if code != exitOK || !strings.Contains(out, "will be updated in-place") || !strings.Contains(out, "spec.approvePlan: "+p.PlanID) {
				t.Errorf("preview (text): exit %d\n%s", code, out)
			}
			time.Sleep(time.Second) // anything the preview had published would be folded by now
			after, _ := object(t, stateDir, "demo", name)
			if after.Generation != 1 || after.Status.Plan == nil || before.Status.Plan == nil || after.Status.Plan.ID != before.Status.Plan.ID ||
				after.Status.Phase != v1alpha1.PhaseApplied {
				t.Errorf("the preview changed the object: before %+v, after %+v", before.Status, after.Status)
			}
			if s, _ := stateSerials(t, stateDir); s["demo/"+name] != serials["demo/"+name] {
				t.Errorf("state serial %d after the preview, want %d", s["demo/"+name], serials["demo/"+name])
			}

			// The manifest merged with that id is applied with exactly that plan.
			write(t, name, "2", p.PlanID)
			waitFor(t, name+" Applied at generation 2", at(t, name, 2, v1alpha1.PhaseApplied))
			if o, _ := object(t, stateDir, "demo", name); o.Status.Plan == nil || o.Status.Plan.ID != p.PlanID {
				t.Fatalf("applied plan %+v, want the previewed %s", o.Status.Plan, p.PlanID)
			}

			// An id previewed before the state moved is not an approval of the plan made after.
			stale := preview(t, name, "3")
			write(t, name, "4", "")
			waitFor(t, name+" Applied at generation 3", at(t, name, 3, v1alpha1.PhaseApplied))
			serials, _ = stateSerials(t, stateDir)
			write(t, name, "3", stale.PlanID)
			waitFor(t, name+" Failed at generation 4", at(t, name, 4, v1alpha1.PhaseFailed))
			o, _ := object(t, stateDir, "demo", name)
			if !hasReason(o, v1alpha1.ReasonPlanSuperseded) {
				t.Errorf("a stale previewed id: conditions %+v, want Failed with reason %s", o.Status.Conditions, v1alpha1.ReasonPlanSuperseded)
			}
			if s, _ := stateSerials(t, stateDir); s["demo/"+name] != serials["demo/"+name] {
				t.Errorf("a stale previewed id was applied: state serial %d, want %d", s["demo/"+name], serials["demo/"+name])
			}
		})
	}

	t.Run("new object", func(t *testing.T) {
		p := preview(t, "pv-new", "1")
		if p.Plan.Summary != (engine.Summary{Add: 1}) || p.Plan.StateSerial != 0 || p.Plan.StateLineage != "" {
			t.Errorf("preview of an object that does not exist yet: %+v, want one create against no state", p.Plan)
		}
		if _, ok := object(t, stateDir, "demo", "pv-new"); ok {
			t.Error("the preview created the object")
		}
	})
	t.Run("source file", func(t *testing.T) {
		// The branch's file in place of the manifest's source: the same plan as inline.
		inline := preview(t, "pv-embedded", "7")
		src := filepath.Join(scratch, "src.tlisp")
		text := "(deflava-architecture pv-embedded\n  :inputs ((:version \"0\")) :resources ((terraform-data \"release\" :input \"{version}\")))\n"
		if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runLava(t, "", "plan", "--speculative", "-f", filepath.Join(scratch, "pv-embedded.yaml"), "--source-file", src, "--state-dir", stateDir, "--json")
		var r previewResult
		if code != exitOK || json.Unmarshal([]byte(out), &r) != nil || r.PlanID != inline.PlanID {
			t.Errorf("--source-file: exit %d, plan %s, want the inline source's %s\n%s%s", code, r.PlanID, inline.PlanID, out, errOut)
		}
		if err := os.WriteFile(src, []byte(strings.Replace(text, "{version}", "{nope}", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut = runLava(t, "", "plan", "--speculative", "-f", filepath.Join(scratch, "pv-embedded.yaml"), "--source-file", src, "--state-dir", stateDir)
		if code != exitInvalid || !strings.Contains(errOut, src+":2:") {
			t.Errorf("--source-file with an error: exit %d, stderr:\n%s\nwant a diagnostic at %s:2", code, errOut, src)
		}
	})
	t.Run("denied", func(t *testing.T) {
		p := filepath.Join(scratch, "pv-denied.yaml")
		if err := os.WriteFile(p, []byte(previewManifest("pv-denied", "embedded", "1", "")), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runLava(t, "", "plan", "--speculative", "-f", p, "--state-dir", stateDir)
		if code != exitInvalid || !strings.Contains(out, "no-pv-denied") || !strings.Contains(errOut, "deny plan") || strings.Contains(out, "To apply exactly this plan") {
			t.Errorf("a denied preview: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
	})
	t.Run("orphaned state", func(t *testing.T) {
		// A name whose object was deleted with deletionPolicy Orphan: its state is refused to
		// whatever object comes next, and so to a preview, which says why.
		p := filepath.Join(manifests, "pv-orphan.yaml")
		if err := os.WriteFile(p, []byte(previewManifest("pv-orphan", "embedded", "1", "")+"  deletionPolicy: Orphan\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "pv-orphan Applied", at(t, "pv-orphan", 1, v1alpha1.PhaseApplied))
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "pv-orphan gone", func() bool { _, ok := object(t, stateDir, "demo", "pv-orphan"); return !ok })
		q := filepath.Join(scratch, "pv-orphan.yaml")
		if err := os.WriteFile(q, []byte(previewManifest("pv-orphan", "embedded", "1", "")), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runLava(t, "", "plan", "--speculative", "-f", q, "--state-dir", stateDir)
		if code != exitInvalid || !strings.Contains(errOut, "StateOrphaned") || strings.Contains(out, "approvePlan") {
			t.Errorf("a preview against an orphaned state: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
	})
	t.Run("invalid manifest", func(t *testing.T) {
		p := filepath.Join(scratch, "bad.yaml")
		bad := strings.Replace(previewManifest("pv-embedded", "embedded", "9", ""), `(terraform-data "release" :input "{version}")`, `(terraform-data "release" :input "{nope}")`, 1)
		if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runLava(t, "", "validate", p)
		if code != exitInvalid {
			t.Fatalf("lava validate of the bad manifest: exit %d", code)
		}
		want := strings.SplitN(errOut, "\n", 2)[0]
		code, out, errOut := runLava(t, "", "plan", "--speculative", "-f", p, "--state-dir", stateDir)
		if code != exitInvalid || !strings.Contains(errOut, want) || strings.Contains(out, "plan") {
			t.Errorf("preview of a manifest that does not render: exit %d, stdout %q, stderr:\n%s\nwant the line %q of lava validate", code, out, errOut, want)
		}
	})
	t.Run("gate rejected", func(t *testing.T) {
		// The gate's findings have no position in the render the server makes: they are
		// printed at spec.gate's line:col, as lava validate prints them, and once each (not
		// again in the reason's message).
		p := filepath.Join(scratch, "gated.yaml")
		gated := strings.Replace(previewManifest("pv-gated", "embedded", "1", ""), "  bindings:", "  gate: cloudflare-r2-bucket\n  bindings:", 1)
		if err := os.WriteFile(p, []byte(gated), 0o644); err != nil {
			t.Fatal(err)
		}
		line := 0
		for i, l := range strings.Split(gated, "\n") {
			if strings.HasPrefix(l, "  gate:") {
				line = i + 1
			}
		}
		code, out, errOut := runLava(t, "", "plan", "--speculative", "-f", p, "--state-dir", stateDir)
		finding := "error: missing required input `account-id`"
		if code != exitInvalid || strings.Count(errOut, "missing required input `account-id`") != 2 || // the summary and the field
			!strings.Contains(errOut, fmt.Sprintf("%s:%d:9: %s", p, line, finding)) || !strings.Contains(errOut, "no plan of demo/pv-gated: GateRejected\n") ||
			strings.Contains(out, "plan") {
			t.Errorf("a preview the gate rejects: exit %d, stdout %q, stderr:\n%s\nwant %q at %s:%d:9, each finding once", code, out, errOut, finding, p, line)
		}
	})
	t.Run("wrong token", func(t *testing.T) {
		tok := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tok, []byte("not-the-token"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runLava(t, "", "plan", "--speculative", "-f", filepath.Join(manifests, "pv-embedded.yaml"), "--state-dir", stateDir, "--token-file", tok)
		if code == exitOK || !strings.Contains(errOut, "unauthenticated") {
			t.Errorf("preview with a wrong token: exit %d, stderr %s", code, errOut)
		}
	})
}

// reviewUpdates reports whether the review body updates address's input to input.
func reviewUpdates(t *testing.T, body []byte, address, input string) bool {
	t.Helper()
	p, err := engine.ParseReviewBody(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range p.ResourceChanges {
		if rc.Address == address && rc.Change != nil && len(rc.Change.Actions) == 1 && rc.Change.Actions[0] == "update" {
			after, _ := rc.Change.After.(map[string]any)
			return after["input"] == input
		}
	}
	return false
}

// hasReason reports whether a condition of o has reason.
func hasReason(o v1alpha1.LavaArchitecture, reason string) bool {
	for _, c := range o.Status.Conditions {
		if c.Reason == reason {
			return true
		}
	}
	return false
}
