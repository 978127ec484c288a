package synthesis

import (
	"archive/tar"
	"compress/gzip"
	"context"
	_ "crypto/sha256" // digest algorithms of Flux artifacts (status.artifact.digest)
	_ "crypto/sha512"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sync/singleflight"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// Defaults of [ArtifactCache].
const (
	// DefaultMaxArtifactBytes bounds a downloaded artifact (the tar.gz): 64 MiB.
	DefaultMaxArtifactBytes = 64 << 20
	// DefaultMaxArtifacts is how many artifacts the cache keeps (least recently used go first).
	DefaultMaxArtifacts = 32
	// DefaultMaxCacheBytes bounds the bytes the cache keeps: 128 MiB (the chart's /tmp is a
	// 256 MiB emptyDir).
	DefaultMaxCacheBytes = 128 << 20
	// DefaultMaxExpandedBytes bounds the bytes of tar stream read (decompressed) while looking
	// for spec.path: 1 GiB. A tar.gz of 64 MiB of zeros expands to about 64 GiB.
	DefaultMaxExpandedBytes = 1 << 30
	// DefaultMaxArchiveEntries bounds the entries read while looking for spec.path.
	DefaultMaxArchiveEntries = 200_000
	// maxSourceFileBytes bounds the .tlisp file read from an artifact (spec.source.inline's
	// limit).
	maxSourceFileBytes = 256 << 10
)

// ArtifactError is a failure to get the file of a Flux artifact. Retryable says a later
// attempt may succeed (a download error); a digest mismatch, a malformed archive or a path
// that is not in the artifact waits for a new revision or spec.
type ArtifactError struct {
	Retryable bool
	Err       error
}

func (e *ArtifactError) Error() string { return e.Err.Error() }
func (e *ArtifactError) Unwrap() error { return e.Err }

// ArtifactCache fetches Flux source artifacts (tar.gz over HTTP from source-controller's
// storage, status.artifact.url), verifies them against status.artifact.digest
// (github.com/opencontainers/go-digest, as Flux does) and keeps verified artifacts on disk
// under their digest, so a revision is downloaded once per synth replica. Safe for
// concurrent use; concurrent requests for one digest share one download.
type ArtifactCache struct {
	// Dir holds the cache, <Dir>/<algorithm>/<hex>.tar.gz. Required.
	Dir string
	// Client downloads (default: an http.Client with a 2-minute timeout).
	Client *http.Client
	// MaxBytes bounds an artifact (default DefaultMaxArtifactBytes).
	MaxBytes int64
	// MaxEntries bounds the number of cached artifacts (default DefaultMaxArtifacts).
	MaxEntries int
	// MaxCacheBytes bounds their total size (default DefaultMaxCacheBytes); the artifact just
	// downloaded is always kept.
	MaxCacheBytes int64
	// MaxExpandedBytes bounds the decompressed bytes read to find a file (default
	// DefaultMaxExpandedBytes), MaxArchiveEntries the entries (default
	// DefaultMaxArchiveEntries): the digest proves who made an artifact, not that it is small
	// once expanded.
	MaxExpandedBytes  int64
	MaxArchiveEntries int

	group singleflight.Group
}

// File returns the bytes of the regular file at p (relative, slash-separated; "./" and "//"
// cleaned) in art's archive. Errors are *ArtifactError.
func (c *ArtifactCache) File(ctx context.Context, art *lavav1.FluxArtifact, p string) ([]byte, error) {
	d, err := digest.Parse(art.GetDigest())
	if err != nil {
		return nil, &ArtifactError{Err: fmt.Errorf("status.artifact.digest %q: %w", art.GetDigest(), err)}
	}
	file, err := c.artifact(ctx, art.GetUrl(), d)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, &ArtifactError{Retryable: true, Err: fmt.Errorf("artifact cache: %w", err)}
	}
	defer f.Close()
	maxExpanded, maxEntries := c.MaxExpandedBytes, c.MaxArchiveEntries
	if maxExpanded <= 0 {
		maxExpanded = DefaultMaxExpandedBytes
	}
	if maxEntries <= 0 {
		maxEntries = DefaultMaxArchiveEntries
	}
	return fileInTarGz(ctx, f, p, tarBounds{expanded: maxExpanded, entries: maxEntries})
}

// artifact is the cached, verified file of digest d, downloaded from url when absent.
func (c *ArtifactCache) artifact(ctx context.Context, url string, d digest.Digest) (string, error) {
	file := filepath.Join(c.Dir, string(d.Algorithm()), d.Encoded()+".tar.gz")
	if _, err := os.Stat(file); err == nil {
		now := time.Now()
		_ = os.Chtimes(file, now, now) // recently used: kept longest
		return file, nil
	}
	_, err, _ := c.group.Do(string(d), func() (any, error) {
		if _, err := os.Stat(file); err == nil {
			return nil, nil
		}
		return nil, c.download(ctx, url, d, file)
	})
	if err != nil {
		return "", err
	}
	return file, nil
}

// download fetches url into file, verifying d on the way; nothing is kept unless it matches.
func (c *ArtifactCache) download(ctx context.Context, url string, d digest.Digest, file string) error {
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return &ArtifactError{Err: fmt.Errorf("status.artifact.url %q is not an http(s) URL", url)}
	}
	client := c.Client
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Minute}
	}
	maxBytes := c.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxArtifactBytes
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return &ArtifactError{Err: fmt.Errorf("status.artifact.url: %w", err)}
	}
	resp, err := client.Do(req)
	if err != nil {
		return &ArtifactError{Retryable: true, Err: fmt.Errorf("download artifact: %w", err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &ArtifactError{Retryable: true, Err: fmt.Errorf("download artifact %s: HTTP %s", url, resp.Status)}
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return &ArtifactError{Retryable: true, Err: fmt.Errorf("artifact cache: %w", err)}
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".download-*")
	if err != nil {
		return &ArtifactError{Retryable: true, Err: fmt.Errorf("artifact cache: %w", err)}
	}
	defer os.Remove(tmp.Name()) // after a successful rename this fails harmlessly
	verifier := d.Verifier()
	n, err := io.Copy(io.MultiWriter(tmp, verifier), io.LimitReader(resp.Body, maxBytes+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return &ArtifactError{Retryable: true, Err: fmt.Errorf("download artifact %s: %w", url, err)}
	case n > maxBytes:
		return &ArtifactError{Err: fmt.Errorf("artifact %s is larger than %d bytes", url, maxBytes)}
	case !verifier.Verified():
		got, _ := digestOfFile(tmp.Name(), d.Algorithm())
		return &ArtifactError{Err: fmt.Errorf("artifact %s: digest %s does not match status.artifact.digest %s: not used", url, got, d)}
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return &ArtifactError{Retryable: true, Err: fmt.Errorf("artifact cache: %w", err)}
	}
	c.evict()
	return nil
}

// digestOfFile is the digest of a file's content with algorithm a ("" on error).
func digestOfFile(name string, a digest.Algorithm) (digest.Digest, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return a.FromReader(f)
}

// staleDownload is the age past which a partial download (".download-*", left by a process
// that ended while downloading) is removed: far past any download's timeout.
const staleDownload = time.Hour

// evict removes the least recently used artifacts beyond MaxEntries or MaxCacheBytes, and
// partial downloads older than staleDownload, so that a directory kept across restarts
// (`lava up`'s, under its state directory) stays bounded.
func (c *ArtifactCache) evict() {
	limit, budget := c.MaxEntries, c.MaxCacheBytes
	if limit <= 0 {
		limit = DefaultMaxArtifacts
	}
	if budget <= 0 {
		budget = DefaultMaxCacheBytes
	}
	type entry struct {
		path string
		used time.Time
		size int64
	}
	var all []entry
	algos, _ := os.ReadDir(c.Dir)
	for _, a := range algos {
		files, _ := os.ReadDir(filepath.Join(c.Dir, a.Name()))
		for _, f := range files {
			info, err := f.Info()
			switch {
			case err != nil:
			case strings.HasSuffix(f.Name(), ".tar.gz"):
				all = append(all, entry{filepath.Join(c.Dir, a.Name(), f.Name()), info.ModTime(), info.Size()})
			case strings.HasPrefix(f.Name(), ".download-") && time.Since(info.ModTime()) > staleDownload:
				_ = os.Remove(filepath.Join(c.Dir, a.Name(), f.Name()))
			}
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return b.used.Compare(a.used) })
	var total int64
	for i, e := range all {
		total += e.size
		if i > 0 && (i >= limit || total > budget) {
			_ = os.Remove(e.path)
		}
	}
}

// tarBounds bound what fileInTarGz reads: decompressed bytes and entries.
type tarBounds struct {
	expanded int64
	entries  int
}

// errExpandedTooLarge ends a read of an archive that expands past its bound.
var errExpandedTooLarge = errors.New("expanded bytes over the bound")

// boundedReader reads r until ctx ends or more than left bytes were read.
type boundedReader struct {
	ctx  context.Context
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	if b.left <= 0 {
		return 0, errExpandedTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// fileInTarGz reads the regular file at p from a tar.gz stream. Nothing is written to disk,
// so entry names cannot escape anywhere; p must be relative and stay inside the archive. It
// reads at most bounds.expanded decompressed bytes and bounds.entries entries, and stops when
// ctx ends: a small archive may expand to many gigabytes or millions of entries, scanned on
// every render.
func fileInTarGz(ctx context.Context, r io.Reader, p string, bounds tarBounds) ([]byte, error) {
	want := path.Clean(strings.TrimPrefix(p, "./"))
	if path.IsAbs(p) || want == ".." || strings.HasPrefix(want, "../") {
		return nil, &ArtifactError{Err: fmt.Errorf("spec.path %q leaves the artifact", p)}
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, &ArtifactError{Err: fmt.Errorf("artifact is not a tar.gz: %w", err)}
	}
	tr := tar.NewReader(&boundedReader{ctx: ctx, r: gz, left: bounds.expanded})
	for entries := 0; ; entries++ {
		if entries >= bounds.entries {
			return nil, &ArtifactError{Err: fmt.Errorf("spec.path %q not found in the first %d entries of the artifact: an artifact is read up to %d entries", p, bounds.entries, bounds.entries)}
		}
		h, err := tr.Next()
		switch {
		case errors.Is(err, io.EOF):
			return nil, &ArtifactError{Err: fmt.Errorf("spec.path %q is not a file in the artifact", p)}
		case errors.Is(err, errExpandedTooLarge):
			return nil, &ArtifactError{Err: fmt.Errorf("spec.path %q not found in the first %d bytes of the expanded artifact: an artifact is read up to that many", p, bounds.expanded)}
		case ctx.Err() != nil:
			return nil, &ArtifactError{Retryable: true, Err: fmt.Errorf("artifact: read %s: %w", p, ctx.Err())}
		case err != nil:
			return nil, &ArtifactError{Err: fmt.Errorf("artifact is not a tar.gz: %w", err)}
		}
		if path.Clean(strings.TrimPrefix(h.Name, "./")) != want {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			return nil, &ArtifactError{Err: fmt.Errorf("spec.path %q is not a regular file in the artifact", p)}
		}
		if h.Size > maxSourceFileBytes {
			return nil, &ArtifactError{Err: fmt.Errorf("spec.path %q is %d bytes, more than %d", p, h.Size, maxSourceFileBytes)}
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxSourceFileBytes))
		if errors.Is(err, errExpandedTooLarge) {
			return nil, &ArtifactError{Err: fmt.Errorf("spec.path %q ends past the first %d bytes of the expanded artifact: an artifact is read up to that many", p, bounds.expanded)}
		}
		if err != nil {
			return nil, &ArtifactError{Err: fmt.Errorf("artifact: read %s: %w", p, err)}
		}
		return b, nil
	}
}
