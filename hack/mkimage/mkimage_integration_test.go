//go:build integration

package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// These tests run mkimage as `make images` does (go build included) on this repository, for
// two of the eight images: the CLI's, the smallest build that can be run here, and the
// applier's, which carries the provider mirror.

// repoRoot is the repository, from this package's directory.
const repoRoot = "../.."

// testOptions are `make images`'s options for the images names, written to a new directory.
func testOptions(t *testing.T, names ...string) options {
	return options{
		repo: repoRoot, out: t.TempDir(), registry: "ghcr.io/lava-operator", tag: "test", version: "test",
		sourceURL: "https://github.com/lava-operator/lava", arch: "amd64",
		values: chartValues, names: names,
	}
}

// runOne runs mkimage for o's single image and returns what it built.
func runOne(t *testing.T, o options) built {
	t.Helper()
	var log bytes.Buffer
	bs, err := run(t.Context(), o, &log)
	t.Log(log.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 1 {
		t.Fatalf("built %d images, want 1", len(bs))
	}
	return bs[0]
}

// load reads back the tarball of b in dir.
func load(t *testing.T, dir string, b built) v1.Image {
	t.Helper()
	ref, err := name.NewTag(b.ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(filepath.Join(dir, b.file), &ref)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// rootfs is an image's flattened filesystem: each path's header, and the content of the
// regular files keep asks for.
type rootfs struct {
	hdr     map[string]*tar.Header
	content map[string][]byte
}

func readRootfs(t *testing.T, img v1.Image, keep ...string) rootfs {
	t.Helper()
	fsys := rootfs{hdr: map[string]*tar.Header{}, content: map[string][]byte{}}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fsys
		}
		if err != nil {
			t.Fatal(err)
		}
		fsys.hdr[h.Name] = h
		for _, k := range keep {
			if h.Name == k {
				if fsys.content[k], err = io.ReadAll(tr); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// size is the size of the file at p, following a hard link.
func (r rootfs) size(p string) (int64, bool) {
	h, ok := r.hdr[p]
	if ok && h.Typeflag == tar.TypeLink {
		h, ok = r.hdr[path.Clean(h.Linkname)]
	}
	if !ok || h.Typeflag != tar.TypeReg {
		return 0, false
	}
	return h.Size, true
}

func TestRun_cliImage_reproducibleAndRuns(t *testing.T) {
	first, second := testOptions(t, "lava"), testOptions(t, "lava")
	a, b := runOne(t, first), runOne(t, second)
	if a.digest != b.digest || a.id != b.id {
		t.Fatalf("built twice from one commit: %s (id %s) and %s (id %s)", a.digest, a.id, b.digest, b.id)
	}
	ta, err := os.ReadFile(filepath.Join(first.out, a.file))
	if err != nil {
		t.Fatal(err)
	}
	tb, err := os.ReadFile(filepath.Join(second.out, b.file))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ta, tb) {
		t.Errorf("the two tarballs differ (%d and %d bytes)", len(ta), len(tb))
	}
	list, err := os.ReadFile(filepath.Join(first.out, "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "ghcr.io/lava-operator/lava:test " + a.digest.String() + " " + a.id.String() + " lava.tar\n"; string(list) != want {
		t.Errorf("images.txt %q, want %q", list, want)
	}

	img := load(t, first.out, a)
	if d, _ := img.Digest(); d != a.digest {
		t.Errorf("the tarball's image has digest %s, images.txt says %s", d, a.digest)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", repoRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	labels := cf.Config.Labels
	if cf.Config.User != "65532:65532" || !strings.HasPrefix(labels["org.opencontainers.image.revision"], strings.TrimSpace(string(head))) ||
		labels["org.opencontainers.image.source"] != "https://github.com/lava-operator/lava" || labels["org.opencontainers.image.version"] != "test" {
		t.Errorf("user %q labels %v: want 65532:65532, the revision HEAD, the source and version test", cf.Config.User, labels)
	}

	fsys := readRootfs(t, img, "usr/local/bin/lava", "etc/ssl/certs/ca-certificates.crt")
	if h := fsys.hdr["tmp"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v, want a directory of mode 1777", h)
	}
	if ca := fsys.content["etc/ssl/certs/ca-certificates.crt"]; !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		t.Errorf("no CA bundle at /etc/ssl/certs/ca-certificates.crt (%d bytes)", len(ca))
	}
	bin := filepath.Join(t.TempDir(), "lava")
	if err := os.WriteFile(bin, fsys.content["usr/local/bin/lava"], 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Usage:") {
		t.Errorf("lava --help from the image: %v\n%s", err, out)
	}
}

func TestRun_applierImage_carriesTheProviderMirror(t *testing.T) {
	// The mirror `make images` puts in by default: hashicorp/local and the test provider 0.1.0
	// (make tools-tofu) and the test provider 0.4.0 (make tools-testkit).
	tofuDir, testkit := os.Getenv("LAVA_TOFU_DIR"), os.Getenv("LAVA_TESTKIT_MIRROR")
	if tofuDir == "" || testkit == "" {
		t.Fatal("LAVA_TOFU_DIR and LAVA_TESTKIT_MIRROR are unset: run through make (make tools-tofu tools-testkit)")
	}
	o := testOptions(t, "applier")
	o.providers = []string{filepath.Join(tofuDir, "providers"), testkit}
	b := runOne(t, o)
	img := load(t, o.out, b)
	fsys := readRootfs(t, img)

	const mirror = "var/lib/lava/providers"
	files := 0
	for _, src := range o.providers {
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			info, err := os.Stat(p)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(src, p)
			if err != nil {
				return err
			}
			files++
			inImage := path.Join(mirror, filepath.ToSlash(rel))
			if size, ok := fsys.size(inImage); !ok || size != info.Size() || fsys.hdr[inImage].Mode&0o111 == 0 {
				t.Errorf("%s: in the image %v, size %d, want a %d-byte executable", inImage, ok, size, info.Size())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{
		mirror + "/registry.opentofu.org/hashicorp/local/1.4.0/linux_amd64/terraform-provider-local_v1.4.0",
		mirror + "/registry.opentofu.org/example/testkit/0.4.0/linux_amd64/terraform-provider-testkit_v0.4.0",
	} {
		if _, ok := fsys.size(p); !ok {
			t.Errorf("the mirror has no %s", p)
		}
	}
	if _, ok := fsys.size("usr/local/bin/lava-applier"); !ok {
		t.Error("the image has no /usr/local/bin/lava-applier")
	}
	if _, ok := fsys.hdr["usr/local/tofu/tofu"]; ok {
		t.Error("OpenTofu is in the image without -tofu")
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	t.Logf("%s: %d layers, %.1f MB compressed, %d mirror files", b.ref, len(layers), float64(total)/1e6, files)
	if files < 6 {
		t.Errorf("%d files in the source mirrors, want at least 6 (local, testkit 0.1.0 and 0.4.0 under two hosts)", files)
	}
}

func TestRun_nodeImages_pauseAndProbeRun(t *testing.T) {
	o := testOptions(t, "pause", "probe")
	o.registry, o.tag, o.version = "localhost/lava-node", "1", ""
	var log bytes.Buffer
	bs, err := run(t.Context(), o, &log)
	t.Log(log.String())
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, b := range bs {
		refs = append(refs, b.ref+" "+b.file)
	}
	if want := []string{"localhost/lava-node/pause:1 pause.tar", "localhost/lava-node/probe:1 probe.tar"}; !slices.Equal(refs, want) {
		t.Fatalf("built %q, want %q (the references hack/cluster/up.sh imports)", refs, want)
	}
	bins := map[string]string{}
	for _, b := range bs {
		img := load(t, o.out, b)
		image := strings.TrimSuffix(b.file, ".tar")
		p := "usr/local/bin/" + image
		fsys := readRootfs(t, img, p)
		bins[image] = filepath.Join(t.TempDir(), image)
		if err := os.WriteFile(bins[image], fsys.content[p], 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// probe get: what the smoke test's client pod runs.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") }))
	defer srv.Close()
	out, err := exec.CommandContext(t.Context(), bins["probe"], "get", srv.URL).CombinedOutput()
	if want := "GET " + srv.URL + " -> 200 OK hello\n"; err != nil || string(out) != want {
		t.Errorf("probe get from the image: %v, %q, want %q", err, out, want)
	}

	// Both static linux/amd64 executables: the pod's root filesystem holds no loader.
	for image, bin := range bins {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatalf("%s: %v", image, err)
		}
		defer f.Close()
		if f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC {
			t.Errorf("%s: machine %s type %s, want an EM_X86_64 executable", image, f.Machine, f.Type)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s: has an interpreter: not static", image)
			}
		}
	}
}
