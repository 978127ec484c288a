package main

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/manifest"
)

// examplesDir is the repository's examples/, from this package's directory.
const examplesDir = "../../examples"

// exampleFiles is every example under examples/, its subdirectories included (examples/cloud,
// the manifests that need a cloud provider): the manifests (manifest.Exts) and the .tlisp
// files. Any other file but a README.md fails the test, so a new example cannot slip past
// the tests that use this list.
func exampleFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(examplesDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "README.md" {
			return err
		}
		if ext := strings.ToLower(filepath.Ext(p)); !slices.Contains(manifest.Exts, ext) && ext != ".tlisp" {
			t.Errorf("%s: not a manifest (%s) or a .tlisp file", p, strings.Join(manifest.Exts, ", "))
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(files, func(f string) bool { return filepath.Dir(f) == filepath.Join(examplesDir, "cloud") }) {
		t.Fatalf("no example in examples/cloud among %v", files)
	}
	return files
}

// TestValidate_examples runs `lava validate` on every example, examples/cloud's included: each
// exits 0 and reports every document ok. Nothing applies examples/cloud on a machine without
// its providers (make up leaves it out), so this is what keeps those manifests valid. Without
// --policy, validate checks lava up's built-in policy, so the demos' files under
// up.DemoDir/NAMESPACE pass the fileWriteRoots rule as `make up` needs.
func TestValidate_examples(t *testing.T) {
	t.Parallel()
	for _, f := range exampleFiles(t) {
		name, _ := filepath.Rel(examplesDir, f)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runLava(t, "", "validate", f)
			if code != exitOK {
				t.Fatalf("lava validate %s: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", name, code, stdout, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			for _, l := range lines {
				if !strings.HasPrefix(l, f) || !strings.Contains(l, ": ok (") {
					t.Errorf("stdout line %q does not report %s ok", l, f)
				}
			}
		})
	}
}

// TestRender_examples renders every example, examples/cloud's included: each must succeed
// and print valid JSON, one value per LavaArchitecture.
func TestRender_examples(t *testing.T) {
	t.Parallel()
	for _, f := range exampleFiles(t) {
		name, _ := filepath.Rel(examplesDir, f)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runLava(t, "", "render", f)
			if code != exitOK {
				t.Fatalf("exit %d:\n%s", code, stderr)
			}
			dec, n := json.NewDecoder(strings.NewReader(stdout)), 0
			for ; ; n++ {
				var v json.RawMessage
				if err := dec.Decode(&v); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatalf("stdout is not JSON (%v):\n%s", err, stdout)
				}
			}
			if n == 0 {
				t.Errorf("stdout has no JSON value:\n%s", stdout)
			}
		})
	}
}

// TestExamples_upLeavesCloudOut: `lava up -f examples/` (make up) reads the manifests of
// examples/ itself, never those of its subdirectory examples/cloud, whose providers this
// machine does not have.
func TestExamples_upLeavesCloudOut(t *testing.T) {
	t.Parallel()
	got, err := manifest.ListFiles([]string{examplesDir})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range exampleFiles(t) {
		if filepath.Dir(f) == filepath.Clean(examplesDir) && slices.Contains(manifest.Exts, filepath.Ext(f)) {
			want = append(want, f)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || len(want) == 0 {
		t.Errorf("lava up -f examples/ reads %v, want %v", got, want)
	}
}
