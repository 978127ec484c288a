package synthesis

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"path"
	"strings"
	"testing"
)

// FuzzFileInTarGz reads spec.path out of an arbitrary byte string taken as a Flux artifact
// (fileInTarGz, the reader of ArtifactCache.File; the archive's digest was checked, its content
// is still the tenant's): nothing panics, every error is an *ArtifactError (reported as
// SourceFetchFailed), a path that is absolute or leaves the archive is refused, and no file
// over maxSourceFileBytes is returned.
func FuzzFileInTarGz(f *testing.F) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range []struct{ name, body string }{{"./arch/main.lava", "(deflava-architecture x)"}, {"arch/link", ""}} {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if e.name == "arch/link" {
			h.Typeflag, h.Linkname = tar.TypeSymlink, "../../etc/passwd"
		}
		if err := tw.WriteHeader(h); err != nil {
			f.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			f.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		f.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes(), "arch/main.lava")
	f.Add(buf.Bytes(), "arch/link")
	f.Add(buf.Bytes(), "../arch/main.lava")
	f.Add(buf.Bytes(), "/arch/main.lava")
	f.Add([]byte("not gzip"), "x")
	f.Fuzz(func(t *testing.T, data []byte, p string) {
		b, err := fileInTarGz(t.Context(), bytes.NewReader(data), p, tarBounds{expanded: 1 << 20, entries: 1000})
		if err != nil {
			var ae *ArtifactError
			if !errors.As(err, &ae) {
				t.Fatalf("error %T %v is not an *ArtifactError", err, err)
			}
			return
		}
		want := path.Clean(strings.TrimPrefix(p, "./"))
		if path.IsAbs(p) || want == ".." || strings.HasPrefix(want, "../") {
			t.Fatalf("path %q leaves the archive and was read", p)
		}
		if len(b) > maxSourceFileBytes {
			t.Fatalf("read %d bytes, more than %d", len(b), maxSourceFileBytes)
		}
	})
}
