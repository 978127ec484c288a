package up

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// realLandlockSupport is landlockSupport as the package sets it, restored after a test.
var realLandlockSupport = landlockSupport

// TestRun_providerRunnerWithoutLandlock: lava up --provider-runner on a kernel without Landlock
// (landlockSupport answering ABI 0) says so at start and applies only namespace demo: another
// namespace's document is an error of its file, at its line and column, and nothing of it is
// applied; an object of that namespace from an earlier run without runners is kept as it was,
// not destroyed.
func TestRun_providerRunnerWithoutLandlock(t *testing.T) {
	manifests, stateDir, files := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "files")
	doc := func(ns string) string {
		return "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: notes, namespace: " + ns + "}\n" +
			"spec:\n  source:\n    inline: |\n      (deflava-architecture notes :resources ((terraform-data \"n\" :input \"" + ns + "\")))\n"
	}
	for name, ns := range map[string]string{"a.yaml": DemoNamespace, "b.yaml": "team-b"} {
		if err := os.WriteFile(filepath.Join(manifests, name), []byte(doc(ns)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(runners bool) (Result, string) {
		t.Helper()
		var out bytes.Buffer
		root := files
		if runners {
			// Its own file root: the namespaces' directories of a run without runners belong to
			// lava up's user, and a runner's must belong to the runner user.
			root += "-runners"
		}
		res, err := Run(t.Context(), Options{Paths: []string{manifests}, StateDir: stateDir, FileRoot: root, Once: true,
			Timeout: 2 * time.Minute, Interval: 100 * time.Millisecond, ProviderRunner: runners, Stdout: &out})
		if err != nil {
			t.Fatalf("Run: %v\n%s", err, out.String())
		}
		return res, out.String()
	}
	phases := func(res Result) map[string]v1alpha1.Phase {
		m := map[string]v1alpha1.Phase{}
		for _, o := range res.Objects {
			m[o.Namespace+"/"+o.Name] = o.Status.Phase
		}
		return m
	}
	uids := func(res Result) map[string]string {
		m := map[string]string{}
		for _, o := range res.Objects {
			m[o.Namespace+"/"+o.Name] = string(o.UID)
		}
		return m
	}

	// Without runners (the default) both namespaces are applied.
	res, _ := run(false)
	if p := phases(res); p["demo/notes"] != v1alpha1.PhaseApplied || p["team-b/notes"] != v1alpha1.PhaseApplied || len(res.FileErrors) != 0 {
		t.Fatalf("without runners: %v, file errors %v; want both Applied", p, res.FileErrors)
	}
	before := uids(res)

	landlockSupport = func() (int, []string) {
		return 0, []string{"no Landlock: provider runners can read and write whatever their user can"}
	}
	t.Cleanup(func() { landlockSupport = realLandlockSupport })
	if err := os.WriteFile(filepath.Join(manifests, "b.yaml"), []byte(strings.Replace(doc("team-b"), ":input \"team-b\"", ":input \"team-b v2\"", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	res, out := run(true)
	if !strings.Contains(out, "so only manifests of namespace demo are applied; those of other namespaces are refused") {
		t.Errorf("lava up did not say it refuses other namespaces:\n%s", out)
	}
	if len(res.FileErrors) != 1 || filepath.Base(res.FileErrors[0].File) != "b.yaml" ||
		!strings.Contains(res.FileErrors[0].Error(), `b.yaml:3:12: namespace "team-b" refused: this kernel has no Landlock`) {
		t.Fatalf("file errors %v, want one for b.yaml at its metadata (3:12) naming the refusal", res.FileErrors)
	}
	p, after := phases(res), uids(res)
	if p["demo/notes"] != v1alpha1.PhaseApplied || p["team-b/notes"] != v1alpha1.PhaseApplied || after["team-b/notes"] != before["team-b/notes"] {
		t.Errorf("with runners and no Landlock: %v, uids %v (before %v); want team-b/notes kept as it was", p, after, before)
	}
	for _, o := range res.Objects {
		if o.Namespace == "team-b" && (o.Generation != 1 || o.DeletionTimestamp != nil) {
			t.Errorf("team-b/notes changed although refused: generation %d, deletion %v", o.Generation, o.DeletionTimestamp)
		}
	}
}

// TestRun_replacedKeysRefused: lava up starts again on its state directory only when every seed
// and key it kept is as it wrote it (a regular file of this user, mode 0600): a seed a provider
// wrote over (mode 0644, the twenty-second trial's helm chart cache) or a key made a symbolic
// link is refused at start, naming the file, before NATS starts.
func TestRun_replacedKeysRefused(t *testing.T) {
	manifests, stateDir := t.TempDir(), t.TempDir()
	doc := "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: notes, namespace: demo}\n" +
		"spec:\n  source:\n    inline: |\n      (deflava-architecture notes :resources ((terraform-data \"n\" :input \"x\")))\n"
	if err := os.WriteFile(filepath.Join(manifests, "a.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func() error {
		_, err := Run(t.Context(), Options{Paths: []string{manifests}, StateDir: stateDir, FileRoot: filepath.Join(t.TempDir(), "files"),
			Once: true, Timeout: time.Minute, Interval: 100 * time.Millisecond})
		return err
	}
	if err := run(); err != nil {
		t.Fatal(err)
	}
	seed := filepath.Join(stateDir, DirNATSCredentials, "bootstrap.nk")
	kept, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		replace func(t *testing.T) (path string, restore func())
	}{
		{"a seed written over by another program", func(t *testing.T) (string, func()) {
			if err := os.Remove(seed); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(seed, kept, 0o644); err != nil {
				t.Fatal(err)
			}
			return seed, func() { _ = os.Chmod(seed, 0o600) }
		}},
		{"a key made a symbolic link", func(t *testing.T) (string, func()) {
			key := filepath.Join(stateDir, FileSigningKey)
			moved := key + ".moved"
			if err := os.Rename(key, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, key); err != nil {
				t.Fatal(err)
			}
			return key, func() { _ = os.Remove(key); _ = os.Rename(moved, key) }
		}},
	} {
		path, restore := tc.replace(t)
		err := run()
		if err == nil || !strings.Contains(err.Error(), path+" is not as lava up writes its keys") {
			t.Errorf("%s: lava up started: %v", tc.name, err)
		}
		restore()
	}
	if err := run(); err != nil {
		t.Errorf("with the files put back: %v", err)
	}
}
