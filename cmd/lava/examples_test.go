package main

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/lang/render"
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

// publishedElsewhere maps a provider's local name to the source it is published under, for
// providers whose hashicorp/NAME address is not theirs (absent, or an archived copy): a
// resource of such a provider with no :providers entry would get hashicorp/NAME
// (engine.Requirements' default) and fail to install, or install the wrong provider.
var publishedElsewhere = map[string]string{
	"akeyless":     "akeyless-community/akeyless",
	"auth0":        "auth0/auth0",
	"cloudflare":   "cloudflare/cloudflare",
	"datadog":      "DataDog/datadog",
	"digitalocean": "digitalocean/digitalocean",
	"github":       "integrations/github",
	"gitlab":       "gitlabhq/gitlab",
	"grafana":      "grafana/grafana",
	"linode":       "linode/linode",
	"newrelic":     "newrelic/newrelic",
	"okta":         "okta/okta",
	"openstack":    "terraform-provider-openstack/openstack",
	"pagerduty":    "PagerDuty/pagerduty",
}

// TestExamples_providerSources: every provider an example needs (engine.Requirements of its
// rendered JSON and :providers, as the engines compute it) resolves to the namespace its
// publisher uses, for the providers of publishedElsewhere.
func TestExamples_providerSources(t *testing.T) {
	t.Parallel()
	for _, f := range exampleFiles(t) {
		name, _ := filepath.Rel(examplesDir, f)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			units, ds := loadUnits(f, data)
			if ds.HasErrors() || len(units) == 0 {
				t.Fatalf("read %s: %d units, %v", f, len(units), ds.Errors())
			}
			for _, u := range units {
				out, ds := render.Synthesize(render.Input{SourceKind: u.SourceKind, SourceName: u.SourceName,
					SourceText: u.SourceText, File: u.File, MapPos: u.MapPos, Bindings: u.Bindings, Gate: u.Gate})
				if out == nil {
					t.Fatalf("%s: synthesis failed: %v", u.Label, ds.Errors())
				}
				src := map[string]string{}
				for _, p := range out.Architecture.Providers {
					src[p.Name] = p.Source
				}
				reqs, err := engine.Requirements(out.Compact, src, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range reqs {
					want, ok := publishedElsewhere[r.Name]
					if !ok {
						continue
					}
					if !strings.EqualFold(strings.TrimPrefix(r.Source, "registry.opentofu.org/"), want) {
						t.Errorf("%s: provider %s resolves to %s, but it is published as %s: declare it (:providers ((%s :source %q)))",
							u.Label, r.Name, r.Source, want, r.Name, want)
					}
				}
			}
		})
	}
}
