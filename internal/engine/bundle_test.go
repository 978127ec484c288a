package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBundle_writesOnlyInsideTheWorkspace is the attack test of the bundled-modules rule
// (docs/security.md, "Engines"): a rendered document's bundle keys that leave the
// workspace, are absolute, or reach a dot directory (.terraform holds the providers tofu
// runs) are refused before anything is written; good keys are written under the root.
func TestBundle_writesOnlyInsideTheWorkspace(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"../x", "/etc/x", "a/../../b", "a/../b", ".terraform/providers", "a/.hidden", "./a", "a/", "a//b", ".", "..", "", "a b", `a\b`} {
		t.Run(dir, func(t *testing.T) {
			root := t.TempDir()
			doc := `{"//":{"lava_modules":{` + quote(dir) + `:{"resource":{}}}}}`
			if _, err := ReadBundle([]byte(doc)); err == nil {
				t.Errorf("ReadBundle accepted %q", dir)
			}
			if err := WriteBundle(root, []byte(doc)); err == nil {
				t.Errorf("WriteBundle accepted %q", dir)
			}
			entries, _ := os.ReadDir(root)
			if len(entries) != 0 {
				t.Errorf("%q: wrote %v", dir, entries)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(root), "x")); err == nil {
				t.Errorf("%q: wrote outside the workspace", dir)
			}
		})
	}
	root := t.TempDir()
	doc := `{"//":{"lava_modules":{"modules/net":{"output":{"o":{"value":1}}},"modules/net/leaf":{}}},"module":{"n":{"source":"./modules/net"}}}`
	if err := WriteBundle(root, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "modules", "net", "main.tf.json"))
	if err != nil || string(b) != `{"output":{"o":{"value":1}}}` {
		t.Errorf("modules/net/main.tf.json = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(root, "modules", "net", "leaf", "main.tf.json")); err != nil {
		t.Error(err)
	}
	// A plain comment and a module not an object.
	if m, err := ReadBundle([]byte(`{"//":"a comment"}`)); err != nil || m != nil {
		t.Errorf("plain comment: %v %v", m, err)
	}
	if _, err := ReadBundle([]byte(`{"//":{"lava_modules":{"m":"x"}}}`)); err == nil || !strings.Contains(err.Error(), "want the module's Terraform JSON object") {
		t.Errorf("string module: %v", err)
	}
	calls, err := ModuleCalls([]byte(doc))
	if err != nil || string(calls) != `{"":{"n":"./modules/net"}}` {
		t.Errorf("ModuleCalls = %s, %v", calls, err)
	}
}

func quote(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}

// TestPlanRecord_AddWarning: warnings are redacted, bounded in length and number, kept once.
func TestPlanRecord_AddWarning(t *testing.T) {
	t.Parallel()
	var rec PlanRecord
	red := NewRedactor("hunter22")
	rec.AddWarning(red, "Check block assertion failed: the password is hunter22")
	rec.AddWarning(red, "Check block assertion failed: the password is hunter22")
	if len(rec.Warnings) != 1 || strings.Contains(rec.Warnings[0], "hunter22") {
		t.Errorf("warnings = %q, want one, redacted", rec.Warnings)
	}
	rec.AddWarning(red, strings.Repeat("x", 2*MaxWarningLen))
	if n := len(rec.Warnings[1]); n > MaxWarningLen+len("…") {
		t.Errorf("a long warning kept %d bytes", n)
	}
	for i := 0; i < 2*MaxWarnings; i++ {
		rec.AddWarning(red, strings.Repeat("w", i+1))
	}
	if len(rec.Warnings) != MaxWarnings {
		t.Errorf("%d warnings kept, want %d", len(rec.Warnings), MaxWarnings)
	}
}
