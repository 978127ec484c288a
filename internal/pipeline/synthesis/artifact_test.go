package synthesis_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline/synthesis"
)

// tarGz builds a tar.gz archive of files (name to content), in order of names given.
func tarGz(t *testing.T, names []string, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, n := range names {
		body := files[n]
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// artifactServer serves body at /a.tar.gz and counts requests.
func artifactServer(t *testing.T, body []byte) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/a.tar.gz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestArtifactCache_verifiesAndCachesByDigest(t *testing.T) {
	body := tarGz(t, []string{"./README.md", "./infra/vpc.tlisp"}, map[string]string{"./README.md": "hi", "./infra/vpc.tlisp": "(deflava-architecture x)"})
	srv, hits := artifactServer(t, body)
	dir := t.TempDir()
	c := &synthesis.ArtifactCache{Dir: dir}
	art := &lavav1.FluxArtifact{Url: srv.URL + "/a.tar.gz", Digest: digest.FromBytes(body).String(), Revision: "main@sha1:1"}
	for i := range 3 {
		got, err := c.File(t.Context(), art, "infra/vpc.tlisp")
		if err != nil || string(got) != "(deflava-architecture x)" {
			t.Fatalf("read %d: %q, %v", i, got, err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d downloads for three reads of one digest, want 1 (cached by digest)", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "sha256", digest.FromBytes(body).Encoded()+".tar.gz")); err != nil {
		t.Errorf("cache file: %v", err)
	}
	if got, err := c.File(t.Context(), art, "./infra//vpc.tlisp"); err != nil || len(got) == 0 {
		t.Errorf("a path with ./ and //: %q, %v", got, err)
	}

	for _, tt := range []struct{ path, want string }{
		{"infra/none.tlisp", `"infra/none.tlisp" is not a file in the artifact`},
		{"../etc/passwd", "leaves the artifact"},
		{"/infra/vpc.tlisp", "leaves the artifact"},
	} {
		_, err := c.File(t.Context(), art, tt.path)
		var ae *synthesis.ArtifactError
		if !errors.As(err, &ae) || ae.Retryable || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("File(%q) = %v, want a permanent ArtifactError containing %q", tt.path, err, tt.want)
		}
	}
}

func TestArtifactCache_digestMismatchIsRefused(t *testing.T) {
	body := tarGz(t, []string{"a.tlisp"}, map[string]string{"a.tlisp": "(x)"})
	srv, hits := artifactServer(t, body)
	dir := t.TempDir()
	c := &synthesis.ArtifactCache{Dir: dir}
	forged := digest.FromString("something else")
	art := &lavav1.FluxArtifact{Url: srv.URL + "/a.tar.gz", Digest: forged.String()}
	_, err := c.File(t.Context(), art, "a.tlisp")
	var ae *synthesis.ArtifactError
	if !errors.As(err, &ae) || ae.Retryable || !strings.Contains(err.Error(), "does not match status.artifact.digest "+forged.String()) {
		t.Fatalf("File with a wrong digest = %v, want a permanent digest mismatch", err)
	}
	// Nothing unverified is kept: a second read downloads (and refuses) again.
	if _, err := c.File(t.Context(), art, "a.tlisp"); err == nil {
		t.Fatal("second read with the wrong digest succeeded")
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("%d downloads, want 2 (a refused artifact is not cached)", n)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "sha256"))
	for _, e := range entries {
		t.Errorf("cache holds %s after a mismatch", e.Name())
	}

	for _, tt := range []struct {
		name  string
		art   *lavav1.FluxArtifact
		retry bool
		want  string
	}{
		{"malformed digest", &lavav1.FluxArtifact{Url: srv.URL + "/a.tar.gz", Digest: "sha256:xyz"}, false, "status.artifact.digest"},
		{"not http", &lavav1.FluxArtifact{Url: "file:///etc/passwd", Digest: digest.FromBytes(body).String()}, false, "not an http(s) URL"},
		{"gone from storage", &lavav1.FluxArtifact{Url: srv.URL + "/gone.tar.gz", Digest: digest.FromString("gone").String()}, true, "HTTP 404"},
	} {
		_, err := c.File(t.Context(), tt.art, "a.tlisp")
		if !errors.As(err, &ae) || ae.Retryable != tt.retry || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an ArtifactError (retryable %v) containing %q", tt.name, err, tt.retry, tt.want)
		}
	}
}

func TestArtifactCache_boundsSizeAndEntries(t *testing.T) {
	dir := t.TempDir()
	c := &synthesis.ArtifactCache{Dir: dir, MaxEntries: 2}
	for i := range 4 {
		body := tarGz(t, []string{"a.tlisp"}, map[string]string{"a.tlisp": strings.Repeat("x", i+1)})
		srv, _ := artifactServer(t, body)
		if _, err := c.File(t.Context(), &lavav1.FluxArtifact{Url: srv.URL + "/a.tar.gz", Digest: digest.FromBytes(body).String()}, "a.tlisp"); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "sha256"))
	if err != nil || len(entries) != 2 {
		t.Errorf("%d cached artifacts (%v), want 2 (MaxEntries)", len(entries), err)
	}

	budget := &synthesis.ArtifactCache{Dir: t.TempDir(), MaxCacheBytes: 1}
	for i := range 3 {
		body := tarGz(t, []string{"a.tlisp"}, map[string]string{"a.tlisp": strings.Repeat("z", i+1)})
		srv, _ := artifactServer(t, body)
		if _, err := budget.File(t.Context(), &lavav1.FluxArtifact{Url: srv.URL + "/a.tar.gz", Digest: digest.FromBytes(body).String()}, "a.tlisp"); err != nil {
			t.Fatal(err)
		}
	}
	if entries, err := os.ReadDir(filepath.Join(budget.Dir, "sha256")); err != nil || len(entries) != 1 {
		t.Errorf("%d cached artifacts over a 1-byte budget (%v), want only the newest", len(entries), err)
	}

	big := tarGz(t, []string{"a.tlisp"}, map[string]string{"a.tlisp": strings.Repeat("y", 4096)})
	srv, _ := artifactServer(t, big)
	small := &synthesis.ArtifactCache{Dir: t.TempDir(), MaxBytes: 64}
	_, err = small.File(t.Context(), &lavav1.FluxArtifact{Url: srv.URL + "/a.tar.gz", Digest: digest.FromBytes(big).String()}, "a.tlisp")
	if err == nil || !strings.Contains(err.Error(), "larger than 64 bytes") {
		t.Errorf("an artifact over MaxBytes: %v, want refused", err)
	}
}

// TestArtifactCache_removesStaleDownloads: a partial download left by a process that ended
// while downloading is removed once older than any download can take; a recent one (another
// download under way) stays.
func TestArtifactCache_removesStaleDownloads(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o700); err != nil {
		t.Fatal(err)
	}
	stale, fresh := filepath.Join(dir, "sha256", ".download-1"), filepath.Join(dir, "sha256", ".download-2")
	for _, f := range []string{stale, fresh} {
		if err := os.WriteFile(f, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	body := tarGz(t, []string{"a.tlisp"}, map[string]string{"a.tlisp": "x"})
	srv, _ := artifactServer(t, body)
	c := &synthesis.ArtifactCache{Dir: dir}
	if _, err := c.File(t.Context(), &lavav1.FluxArtifact{Url: srv.URL + "/a.tar.gz", Digest: digest.FromBytes(body).String()}, "a.tlisp"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stale partial download is still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("the recent partial download was removed: %v", err)
	}
}

// bombTarGz is a tar.gz whose file a.tlisp comes after pad: one entry of padBytes zeros and
// entries empty entries, each named p (a few MiB of archive expanding to gigabytes, or
// millions of entries).
func bombTarGz(t *testing.T, padBytes int64, entries int) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(gz)
	if padBytes > 0 {
		if err := tw.WriteHeader(&tar.Header{Name: "pad", Mode: 0o644, Size: padBytes, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		zero := make([]byte, 1<<20)
		for n := padBytes; n > 0; n -= int64(len(zero)) {
			if _, err := tw.Write(zero[:min(n, int64(len(zero)))]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range entries {
		if err := tw.WriteHeader(&tar.Header{Name: "p", Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
	}
	body := `(deflava-architecture x :resources ((terraform-data "a" :input "x")))`
	if err := tw.WriteHeader(&tar.Header{Name: "a.tlisp", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestArtifactCache_expansionBombAttack: a tenant's Flux artifact (an OCIRepository layer
// copied as is, a Bucket, a git tree) of a few MiB that expands to gigabytes of zeros, or to
// millions of empty entries, before spec.path: synth read all of it on every render, without
// looking at its context (4 GiB from 4 MiB in 1 s, 4 million entries from 9 MiB in 10 s; a
// 64 MiB artifact is about 15 s and 70 s of a synth worker's CPU per render, uncancellable).
// Now the read stops at the expanded-bytes and entries bounds, and when its context ends.
func TestArtifactCache_expansionBombAttack(t *testing.T) {
	read := func(t *testing.T, ctx context.Context, c *synthesis.ArtifactCache, body []byte) (time.Duration, error) {
		t.Helper()
		srv, _ := artifactServer(t, body)
		start := time.Now()
		_, err := c.File(ctx, &lavav1.FluxArtifact{Url: srv.URL + "/a.tar.gz", Digest: digest.FromBytes(body).String()}, "a.tlisp")
		return time.Since(start), err
	}
	zeros := bombTarGz(t, synthesis.DefaultMaxExpandedBytes+(64<<20), 0)
	took, err := read(t, t.Context(), &synthesis.ArtifactCache{Dir: t.TempDir()}, zeros)
	var ae *synthesis.ArtifactError
	if !errors.As(err, &ae) || ae.Retryable || !strings.Contains(err.Error(), "bytes of the expanded artifact") {
		t.Errorf("a %d-byte artifact expanding past %d bytes: %v after %v, want refused at the bound (not retried)", len(zeros), synthesis.DefaultMaxExpandedBytes, err, took)
	}
	many := bombTarGz(t, 0, synthesis.DefaultMaxArchiveEntries+1000)
	took, err = read(t, t.Context(), &synthesis.ArtifactCache{Dir: t.TempDir()}, many)
	if !errors.As(err, &ae) || ae.Retryable || !strings.Contains(err.Error(), "entries") {
		t.Errorf("an artifact of %d entries before spec.path: %v after %v, want refused at the bound", synthesis.DefaultMaxArchiveEntries+1000, err, took)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	c := &synthesis.ArtifactCache{Dir: t.TempDir()}
	small := bombTarGz(t, 64<<20, 0)
	if _, err := read(t, t.Context(), c, small); err != nil {
		t.Fatalf("an artifact within the bounds: %v", err)
	}
	if _, err := read(t, ctx, c, small); !errors.Is(err, context.Canceled) {
		t.Errorf("a read whose context ended: %v, want context.Canceled", err)
	}
}
