//go:build integration

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// namespaceRootAttack: team-a writes its own file, and tries to overwrite team-b's file in
// team-b's root; team-b writes that file. ROOT is replaced by the test's --file-root.
const namespaceRootAttack = `apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: own, namespace: team-a}
spec:
  source:
    inline: |
      (deflava-architecture own
        :resources ((local-file "f" :filename "ROOT/team-a/own.txt" :content "team-a")))
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: cross, namespace: team-a}
spec:
  source:
    inline: |
      (deflava-architecture cross
        :resources ((local-file "f" :filename "ROOT/team-b/victim.txt" :content "overwritten by team-a")))
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: victim, namespace: team-b}
spec:
  source:
    inline: |
      (deflava-architecture victim
        :resources ((local-file "f" :filename "ROOT/team-b/victim.txt" :content "team-b")))
`

// TestUp_namespaceFileRootAttacks: under lava up's built-in policy each namespace writes only
// below its own root, --file-root/NAMESPACE: team-a's write into team-b's root ends Failed
// (PolicyRejected, naming team-a's root) and team-b's file keeps its content, while each
// namespace's own write applies. lava up creates --file-root and the namespaces' roots with
// mode 0700, and refuses to start on a --file-root that is a symbolic link or open to others,
// or with --policy; a namespace whose root is a planted file is an error of its documents. (Before: one root, /tmp/lava-demo, for every namespace, in world-writable
// /tmp.)
func TestUp_namespaceFileRootAttacks(t *testing.T) {
	root := filepath.Join(t.TempDir(), "files")
	manifests := t.TempDir()
	if err := os.WriteFile(filepath.Join(manifests, "m.yaml"), []byte(strings.ReplaceAll(namespaceRootAttack, "ROOT", root)), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	upOnce(t, manifests, stateDir, "--file-root", root)

	for _, k := range [][2]string{{"team-a", "own"}, {"team-b", "victim"}} {
		if o, _ := object(t, stateDir, k[0], k[1]); o.Status.Phase != v1alpha1.PhaseApplied {
			t.Errorf("%s/%s: phase %s %+v, want Applied", k[0], k[1], o.Status.Phase, o.Status.Conditions)
		}
	}
	o, _ := object(t, stateDir, "team-a", "cross")
	want := `the path "` + root + `/team-b/victim.txt" is outside the allowed directories (fileWriteRoots: ` + root + `/team-a)`
	if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionSynthesized); o.Status.Phase != v1alpha1.PhaseFailed || c == nil ||
		c.Reason != v1alpha1.ReasonPolicyRejected || !strings.Contains(c.Message, want) {
		t.Errorf("team-a/cross: phase %s, Synthesized %+v; want Failed, PolicyRejected, a message with %q", o.Status.Phase, c, want)
	}
	if got := readFile(t, filepath.Join(root, "team-b", "victim.txt")); got != "team-b" {
		t.Errorf("team-b's file = %q, want %q", got, "team-b")
	}
	if got := readFile(t, filepath.Join(root, "team-a", "own.txt")); got != "team-a" {
		t.Errorf("team-a's file = %q, want %q", got, "team-a")
	}
	for _, d := range []string{root, filepath.Join(root, "team-a"), filepath.Join(root, "team-b")} {
		if st, err := os.Lstat(d); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v (%v), want a directory with mode 0700", d, st, err)
		}
	}

	// A namespace's root planted as a file: its document is an error of its file, at its
	// position, and --once ends at once instead of waiting for an object that is never planned.
	planted := filepath.Join(root, "team-c")
	if err := os.WriteFile(planted, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	third := t.TempDir()
	if err := os.WriteFile(filepath.Join(third, "c.yaml"), []byte("apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: c, namespace: team-c}\n"+
		"spec:\n  source:\n    inline: |\n      (deflava-architecture c\n        :resources ((terraform-data \"d\" :input \"c\")))\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runLava(t, "", "up", "--once", "-f", third, "--state-dir", filepath.Join(t.TempDir(), "state"),
		"--providers", t.TempDir(), "--timeout", "1m", "--file-root", root)
	if want := "c.yaml:3:12: not applied: file root " + planted[:20]; code == exitOK || !strings.Contains(stdout, want) || strings.Contains(stderr, "not settled") {
		t.Errorf("lava up with team-c's root a file: exit %d, stdout %q, stderr %q; want a failure naming %q, not a timeout", code, stdout, stderr, want)
	}

	// A --file-root planted as a link to a directory someone else controls, one open to
	// others, and --file-root with --policy are refused at start.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--file-root", link}, "up: file root " + link + " is a symbolic link"},
		{[]string{"--file-root", open}, "up: file root " + open + " has mode 0755, open to group or others"},
		{[]string{"--file-root", root, "--policy", rootsPolicy(t, root)}, "--file-root is the built-in policy's"},
	} {
		code, _, stderr := runLava(t, "", append([]string{"up", "--once", "-f", manifests, "--state-dir", filepath.Join(t.TempDir(), "state"),
			"--providers", t.TempDir(), "--timeout", "1m"}, tt.args...)...)
		if code == exitOK || !strings.Contains(stderr, tt.want) {
			t.Errorf("lava up %v: exit %d, stderr %q; want a failure with %q", tt.args, code, stderr, tt.want)
		}
	}
}
