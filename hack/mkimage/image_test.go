package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
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

// targetNamed returns the target called name.
func targetNamed(t *testing.T, name string) target {
	t.Helper()
	for _, tg := range targets() {
		if tg.name == name {
			return tg
		}
	}
	t.Fatalf("no target %s", name)
	return target{}
}

func TestSelectTargets(t *testing.T) {
	refs := func(ts []target) []string {
		var out []string
		for _, tg := range ts {
			out = append(out, tg.image+":"+imageTag(options{tag: "dev"}, tg))
		}
		return out
	}
	all, err := selectTargets(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Without names: Lava's images, not the one-node cluster's.
	want := []string{"lava-watcher:dev", "lava-synth:dev", "lava-applier:dev", "lava-drift:dev", "lava-viggy:dev", "lava-anomaly:dev", "lava-attest:dev", "lava:dev"}
	if diff := cmp.Diff(want, refs(all)); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}
	// Named, in build order, a NAME:TAG with its own tag.
	node, err := selectTargets([]string{"nats:v2.15.2", "coredns:v1.14.7", "probe", "pause"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"pause:dev", "probe:dev", "coredns:v1.14.7", "nats:v2.15.2"}, refs(node)); diff != "" {
		t.Errorf("the one-node cluster's images (-want +got):\n%s", diff)
	}
	for _, tg := range targets() {
		if tg.pkg == "" {
			continue // a binary built elsewhere
		}
		if _, err := os.Stat(filepath.Join("../..", tg.module, tg.pkg)); err != nil {
			t.Errorf("%s: %v", tg.name, err)
		}
	}
	if _, err := selectTargets([]string{"lava", "nosuch"}); err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("an unknown image: %v, want an error naming it", err)
	}
	if _, err := selectTargets([]string{"nosuch:1"}); err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("an unknown image with a tag: %v, want an error naming it", err)
	}
	if _, err := selectTargets([]string{"coredns:"}); err == nil || !strings.Contains(err.Error(), "empty tag") {
		t.Errorf("an empty tag: %v, want it refused", err)
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
	tg := targetNamed(t, "applier")
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

// The one-node cluster's pause and probe: the base layer and the binary, with their own user
// and arguments.
func TestAssemble_nodeImages(t *testing.T) {
	created := time.Unix(1765000000, 0).UTC()
	work := t.TempDir()
	ca, _, err := caBundle()
	if err != nil {
		t.Fatal(err)
	}
	base, err := baseTree(ca)
	if err != nil {
		t.Fatal(err)
	}
	baseLayer, err := base.layer(work, created)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, work, "bin", "#!/bin/true\n", 0o755)
	o := options{arch: "amd64", tag: "1", sourceURL: "https://example.com/lava"}
	for _, tt := range []struct {
		name, user string
		cmd        []string
	}{
		{name: "pause", user: "65535:65535"},
		{name: "probe", user: "65532:65532", cmd: []string{"serve"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tg := targetNamed(t, tt.name)
			bin := tree{}
			if err := bin.add(entry{path: tg.binary(), src: filepath.Join(work, "bin"), mode: 0o755}); err != nil {
				t.Fatal(err)
			}
			binLayer, err := bin.layer(work, created)
			if err != nil {
				t.Fatal(err)
			}
			img, err := assemble([]mutate.Addendum{{Layer: baseLayer}, {Layer: binLayer}}, tg, o, sourceInfo{revision: "abc123", created: created})
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			want := v1.Config{
				User:       tt.user,
				Entrypoint: []string{"/usr/local/bin/" + tt.name},
				Cmd:        tt.cmd,
				WorkingDir: "/home/nonroot",
				Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
				Labels: map[string]string{
					"org.opencontainers.image.source":   "https://example.com/lava",
					"org.opencontainers.image.revision": "abc123",
					"org.opencontainers.image.version":  "1",
					"org.opencontainers.image.created":  "2025-12-06T05:46:40Z",
					"org.opencontainers.image.title":    tt.name,
				},
			}
			if diff := cmp.Diff(want, cf.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			hdrs, _ := tarHeaders(t, mutate.Extract(img))
			got := map[string]*tar.Header{}
			for _, h := range hdrs {
				got[h.Name] = h
			}
			for _, p := range []string{"etc/passwd", "etc/ssl/certs/ca-certificates.crt", "tmp", "usr/local/bin/" + tt.name} {
				if got[p] == nil {
					t.Errorf("the image has no %s", p)
				}
			}
			if h := got["usr/local/bin/"+tt.name]; h != nil && h.Mode != 0o755 {
				t.Errorf("the binary's mode %o, want 755", h.Mode)
			}
		})
	}
}

// The coredns image holds the binary -coredns gives, as it is: run builds it without go build.
func TestRun_corednsPrebuilt(t *testing.T) {
	work := t.TempDir()
	writeFile(t, work, "coredns", "#!/bin/sh\necho coredns\n", 0o755)
	o := options{repo: "../..", out: t.TempDir(), registry: "localhost/lava-node", tag: "1", arch: "amd64",
		sourceURL: "https://github.com/lava-operator/lava", values: chartValues,
		prebuilt: map[string]string{"coredns": filepath.Join(work, "coredns")}, names: []string{"coredns:v1.14.7"}}
	var log strings.Builder
	bs, err := run(t.Context(), o, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(bs) != 1 || bs[0].ref != "localhost/lava-node/coredns:v1.14.7" || bs[0].file != "coredns.tar" {
		t.Fatalf("built %+v, want localhost/lava-node/coredns:v1.14.7 in coredns.tar", bs)
	}
	ref, err := name.NewTag(bs[0].ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(filepath.Join(o.out, bs[0].file), &ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(img); err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/coredns"}) || c.Cmd != nil || len(c.ExposedPorts) != 0 ||
		c.Labels["org.opencontainers.image.version"] != "v1.14.7" || c.Labels["org.opencontainers.image.title"] != "coredns" {
		t.Errorf("config %+v: want user 65532:65532, entrypoint /usr/local/bin/coredns, no arguments or ports, version v1.14.7, title coredns", c)
	}
	hdrs, files := tarHeaders(t, mutate.Extract(img))
	if got := string(files["usr/local/bin/coredns"]); got != "#!/bin/sh\necho coredns\n" {
		t.Errorf("usr/local/bin/coredns holds %q, want the -coredns file", got)
	}
	for _, h := range hdrs {
		if h.Name == "usr/local/bin/coredns" && h.Mode != 0o755 {
			t.Errorf("usr/local/bin/coredns: mode %o, want 755", h.Mode)
		}
	}
	if _, ok := files["etc/ssl/certs/ca-certificates.crt"]; !ok {
		t.Error("the image has no base layer (no CA certificates)")
	}

	o.prebuilt, o.out = map[string]string{}, t.TempDir()
	if _, err := run(t.Context(), o, io.Discard); err == nil || !strings.Contains(err.Error(), "-coredns") {
		t.Errorf("coredns without -coredns: %v, want an error naming -coredns", err)
	}
	o.names = []string{"nats"}
	if _, err := run(t.Context(), o, io.Discard); err == nil || !strings.Contains(err.Error(), "-nats") {
		t.Errorf("nats without -nats: %v, want an error naming -nats", err)
	}
}
