package enginetest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
)

// DriftCase is one change made behind an engine's back and the findings every engine family
// must report for it: both classify with [engine.Classify], and a scan of the same state and
// configuration gives the same findings on each.
type DriftCase struct {
	Name string
	// Change changes the real world (the files under dir) after the apply.
	Change func(dir string) error
	// Want are the findings, Address, Attribute, Change and Severity compared.
	Want []engine.Finding
}

// DriftCases are out-of-band changes of a file of the test provider example/testkit, each a
// replacement of the whole object, critical: converging creates a new object with a new id
// (OpenTofu's plan has it as resource_drift "delete", then a create):
//   - the file deleted;
//   - its content rewritten (testkit's read, as hashicorp/local's, finds an object whose
//     content differs gone).
func DriftCases() []DriftCase {
	return []DriftCase{
		{Name: "content rewritten", Change: func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "a.txt"), []byte("changed"), 0o600)
		}, Want: []engine.Finding{{Address: "testkit_file.a", Attribute: "*", Change: engine.ActionReplace, Severity: engine.SeverityCritical}}},
		{Name: "deleted", Change: func(dir string) error {
			return os.Remove(filepath.Join(dir, "a.txt"))
		}, Want: []engine.Finding{{Address: "testkit_file.a", Attribute: "*", Change: engine.ActionReplace, Severity: engine.SeverityCritical}}},
	}
}

// DriftDocument is the rendered configuration the cases apply: one testkit_file in dir.
func DriftDocument(dir string) string {
	return fmt.Sprintf(`{"resource":{"testkit_file":{"a":{"filename":%q,"content":"declared"}}}}`, filepath.Join(dir, "a.txt"))
}

// CheckDrift compares a scan's findings with c.Want (Address, Attribute, Change, Severity, in
// order) and the report's maximum severity with theirs.
func CheckDrift(t testing.TB, c DriftCase, rep *engine.DriftReport) {
	t.Helper()
	if len(rep.Findings) != len(c.Want) {
		t.Fatalf("%s: findings %+v, want %+v", c.Name, rep.Findings, c.Want)
	}
	var max engine.Severity
	for i, f := range rep.Findings {
		w := c.Want[i]
		if f.Address != w.Address || f.Attribute != w.Attribute || f.Change != w.Change || f.Severity != w.Severity {
			t.Errorf("%s: finding %d = %+v, want %+v", c.Name, i, f, w)
		}
		if w.Severity.Rank() > max.Rank() {
			max = w.Severity
		}
	}
	if rep.MaxSeverity != max {
		t.Errorf("%s: max severity %q, want %q", c.Name, rep.MaxSeverity, max)
	}
}

// DriftEngine is an engine under test for [RunDriftCases]: Apply plans and applies a rendered
// document, Scan scans it for drift; each on its own state, made for one case.
type DriftEngine struct {
	Apply func(doc string) error
	Scan  func(doc string) (*engine.DriftReport, error)
}

// RunDriftCases runs every [DriftCases] case as a subtest on an engine newEngine makes for it:
// apply [DriftDocument], change the real world, scan, and [CheckDrift].
func RunDriftCases(t *testing.T, newEngine func(t *testing.T) DriftEngine) {
	for _, c := range DriftCases() {
		t.Run(c.Name, func(t *testing.T) {
			e := newEngine(t)
			dir := t.TempDir()
			doc := DriftDocument(dir)
			if err := e.Apply(doc); err != nil {
				t.Fatal(err)
			}
			if err := c.Change(dir); err != nil {
				t.Fatal(err)
			}
			rep, err := e.Scan(doc)
			if err != nil {
				t.Fatal(err)
			}
			CheckDrift(t, c, rep)
		})
	}
}
