package main

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// chartValues is the chart's values file, from this package's directory.
const chartValues = "../../deploy/charts/lava/values.yaml"

func TestReadValues_chart(t *testing.T) {
	got, err := readValues(chartValues)
	if err != nil {
		t.Fatal(err)
	}
	// The chart's defaults: the mirror where the services look for it (LAVA_PROVIDER_DIR), and
	// OpenTofu where docs/install.md tells to point applier.tofuBin and drift.tofuBin.
	want := map[string]engineValues{
		"applier": {ProviderDir: "/var/lib/lava/providers", TofuBin: defaultTofuBin},
		"drift":   {ProviderDir: "/var/lib/lava/providers", TofuBin: defaultTofuBin},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}

	bad := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(bad, []byte("applier: {providerDir: relative}\ndrift: {providerDir: /p}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readValues(bad); err == nil || !strings.Contains(err.Error(), "applier.providerDir") {
		t.Errorf("a relative providerDir: %v, want an error naming applier.providerDir", err)
	}
}

func TestSelectTargets(t *testing.T) {
	all, err := selectTargets(nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tg := range all {
		names = append(names, tg.image())
	}
	want := []string{"lava-watcher", "lava-synth", "lava-applier", "lava-drift", "lava-viggy", "lava-anomaly", "lava-attest", "lava"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}
	for _, tg := range all {
		if _, err := os.Stat(filepath.Join("../..", tg.module, tg.pkg)); err != nil {
			t.Errorf("%s: %v", tg.name, err)
		}
	}
	if _, err := selectTargets([]string{"lava", "nosuch"}); err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("an unknown image: %v, want an error naming it", err)
	}
}

// assembleFake assembles the applier's image as buildOne does, with a shell script standing in
// for the binary (no go build) and a one-file mirror, and returns it.
func assembleFake(t *testing.T, work string, created time.Time) v1.Image {
	t.Helper()
	writeFile(t, work, "bin", "#!/bin/true\n", 0o755)
	writeFile(t, work, "tofu", "tofu\n", 0o755)
	writeFile(t, work, "mirror/registry.opentofu.org/hashicorp/local/1.4.0/linux_amd64/terraform-provider-local_v1.4.0", "p", 0o755)
	ca, _, err := caBundle()
	if err != nil {
		t.Fatal(err)
	}
	base, err := baseTree(ca)
	if err != nil {
		t.Fatal(err)
	}
	s := &shared{work: work, created: created, mirrors: map[string]v1.Layer{}, tofu: map[string]v1.Layer{}}
	if s.base, err = base.layer(work, created); err != nil {
		t.Fatal(err)
	}
	tg := targets()[2]
	o := options{arch: "amd64", version: "1.2.3", sourceURL: "https://example.com/lava",
		providers: []string{filepath.Join(work, "mirror")}, tofu: filepath.Join(work, "tofu")}
	ev := engineValues{ProviderDir: "/var/lib/lava/providers", TofuBin: defaultTofuBin}
	engine, err := engineLayers(o, ev, s)
	if err != nil {
		t.Fatal(err)
	}
	bin := tree{}
	if err := bin.add(entry{path: tg.binary(), src: filepath.Join(work, "bin"), mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	binLayer, err := bin.layer(work, created)
	if err != nil {
		t.Fatal(err)
	}
	adds := append([]mutate.Addendum{{Layer: s.base}}, engine...)
	adds = append(adds, mutate.Addendum{Layer: binLayer})
	img, err := assemble(adds, tg, o, sourceInfo{revision: "abc123", created: created})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestAssemble_config(t *testing.T) {
	created := time.Unix(1765000000, 0).UTC()
	img := assembleFake(t, t.TempDir(), created)
	again := assembleFake(t, t.TempDir(), created)
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("the same inputs assembled twice: digests %s and %s", d1, d2)
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Time.Equal(created) {
		t.Errorf("platform %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	want := v1.Config{
		User:         "65532:65532",
		Entrypoint:   []string{"/usr/local/bin/lava-applier"},
		WorkingDir:   "/home/nonroot",
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		ExposedPorts: map[string]struct{}{"9090/tcp": {}, "9091/tcp": {}},
		Labels: map[string]string{
			"org.opencontainers.image.source":   "https://example.com/lava",
			"org.opencontainers.image.revision": "abc123",
			"org.opencontainers.image.version":  "1.2.3",
			"org.opencontainers.image.created":  "2025-12-06T05:46:40Z",
			"org.opencontainers.image.title":    "lava-applier",
		},
	}
	if diff := cmp.Diff(want, cf.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}

	hdrs, _ := tarHeaders(t, mutate.Extract(img))
	got := map[string]bool{}
	for _, h := range hdrs {
		got[h.Name] = true
		if h.Typeflag == tar.TypeReg && !h.ModTime.Equal(created) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, created)
		}
	}
	for _, p := range []string{"tmp", "etc/ssl/certs/ca-certificates.crt", "usr/local/tofu/tofu", "usr/local/bin/lava-applier",
		"var/lib/lava/providers/registry.opentofu.org/hashicorp/local/1.4.0/linux_amd64/terraform-provider-local_v1.4.0"} {
		if !got[p] {
			t.Errorf("the image has no %s", p)
		}
	}
}

func TestWrite_digestSurvivesTheTarball(t *testing.T) {
	dir := t.TempDir()
	img := assembleFake(t, t.TempDir(), time.Unix(0, 0))
	ref, err := name.NewTag("ghcr.io/lava-operator/lava-applier:test")
	if err != nil {
		t.Fatal(err)
	}
	b, err := write(dir, ref, img)
	if err != nil {
		t.Fatal(err)
	}
	if b.file != "lava-applier.tar" {
		t.Errorf("file %q, want lava-applier.tar", b.file)
	}
	// What `crane push` and `ctr images import` read back: the same manifest and config.
	back, err := tarball.ImageFromPath(filepath.Join(dir, b.file), &ref)
	if err != nil {
		t.Fatal(err)
	}
	// Every blob matches its digest, the manifest its config and layers.
	if err := validate.Image(back); err != nil {
		t.Fatal(err)
	}
	d, err := back.Digest()
	if err != nil {
		t.Fatal(err)
	}
	id, err := back.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if d != b.digest || id != b.id {
		t.Errorf("read back digest %s id %s, written %s %s", d, id, b.digest, b.id)
	}
	if err := writeList(filepath.Join(dir, "images.txt"), []built{b}); err != nil {
		t.Fatal(err)
	}
	list, err := os.ReadFile(filepath.Join(dir, "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := ref.String() + " " + d.String() + " " + id.String() + " lava-applier.tar\n"; string(list) != want {
		t.Errorf("images.txt %q, want %q", list, want)
	}
}
