package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// writeFile creates file rel under dir with content and mode.
func writeFile(t *testing.T, dir, rel, content string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	// WriteFile's mode is filtered by the umask.
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// tarHeaders reads an uncompressed tar stream and returns its headers in order, and the content
// of its regular files by name.
func tarHeaders(t *testing.T, r io.Reader) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	tr := tar.NewReader(r)
	var hdrs []*tar.Header
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs, files
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, h)
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		}
	}
}

func TestTree_writeTar_sortedFixedAndLinked(t *testing.T) {
	src := t.TempDir()
	writeFile(t, src, "registry.opentofu.org/x/p/1.0.0/linux_amd64/terraform-provider-p_v1.0.0", "provider", 0o750)
	writeFile(t, src, "registry.terraform.io/x/p/1.0.0/linux_amd64/terraform-provider-p_v1.0.0", "provider", 0o755)
	writeFile(t, src, "README", "text", 0o600)
	// A second mirror: the same file again is fine, a new one is merged in.
	other := t.TempDir()
	writeFile(t, other, "README", "text", 0o644)
	writeFile(t, other, "registry.opentofu.org/x/q/2.0.0/linux_amd64/terraform-provider-q_v2.0.0", "q", 0o755)

	tr := tree{}
	for _, d := range []string{src, other} {
		if err := tr.addDir(d, "/var/lib/lava/providers"); err != nil {
			t.Fatal(err)
		}
	}
	mtime := time.Unix(1700000000, 0).UTC()
	var first, second bytes.Buffer
	if err := tr.writeTar(&first, mtime); err != nil {
		t.Fatal(err)
	}
	if err := tr.writeTar(&second, mtime); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Error("two writes of one tree differ")
	}

	hdrs, files := tarHeaders(t, &first)
	type row struct {
		Name, Link string
		Type       byte
		Mode       int64
	}
	var got []row
	for _, h := range hdrs {
		if !h.ModTime.Equal(mtime) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: mtime %v uid %d gid %d uname %q gname %q, want %v and root without names", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname, mtime)
		}
		got = append(got, row{h.Name, h.Linkname, h.Typeflag, h.Mode})
	}
	const p = "var/lib/lava/providers/"
	const opentofu, terraform = p + "registry.opentofu.org/x/p/1.0.0/linux_amd64/", p + "registry.terraform.io/x/p/1.0.0/linux_amd64/"
	dir := func(n string) row { return row{Name: n, Type: tar.TypeDir, Mode: 0o755} }
	want := []row{
		dir("var/"), dir("var/lib/"), dir("var/lib/lava/"), dir(p),
		{Name: p + "README", Type: tar.TypeReg, Mode: 0o644},
		dir(p + "registry.opentofu.org/"), dir(p + "registry.opentofu.org/x/"), dir(p + "registry.opentofu.org/x/p/"),
		dir(p + "registry.opentofu.org/x/p/1.0.0/"), dir(opentofu),
		{Name: opentofu + "terraform-provider-p_v1.0.0", Type: tar.TypeReg, Mode: 0o755},
		dir(p + "registry.opentofu.org/x/q/"), dir(p + "registry.opentofu.org/x/q/2.0.0/"), dir(p + "registry.opentofu.org/x/q/2.0.0/linux_amd64/"),
		{Name: p + "registry.opentofu.org/x/q/2.0.0/linux_amd64/terraform-provider-q_v2.0.0", Type: tar.TypeReg, Mode: 0o755},
		dir(p + "registry.terraform.io/"), dir(p + "registry.terraform.io/x/"), dir(p + "registry.terraform.io/x/p/"),
		dir(p + "registry.terraform.io/x/p/1.0.0/"), dir(terraform),
		{Name: terraform + "terraform-provider-p_v1.0.0", Link: opentofu + "terraform-provider-p_v1.0.0", Type: tar.TypeLink, Mode: 0o755},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layer entries (-want +got):\n%s", diff)
	}
	if string(files[opentofu+"terraform-provider-p_v1.0.0"]) != "provider" || string(files[p+"README"]) != "text" {
		t.Errorf("file contents: %q", files)
	}
}

func TestTree_add_conflicts(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeFile(t, a, "f", "one", 0o644)
	writeFile(t, b, "f", "two", 0o644)
	tr := tree{}
	if err := tr.addDir(a, "/m"); err != nil {
		t.Fatal(err)
	}
	if err := tr.addDir(b, "/m"); err == nil || !strings.Contains(err.Error(), "two different files") {
		t.Errorf("merging a different file at the same path: %v, want an error naming two different files", err)
	}
	if err := tr.add(entry{path: "/m/f/g", data: []byte("x"), mode: 0o644}); err == nil {
		t.Error("a file below a file was accepted")
	}
	if err := tr.add(entry{path: "relative", dir: true, mode: 0o755}); err == nil {
		t.Error("a relative path was accepted")
	}
	if err := os.Symlink(a, filepath.Join(b, "link")); err != nil {
		t.Fatal(err)
	}
	if err := (tree{}).addDir(b, "/n"); err == nil || !strings.Contains(err.Error(), "symbolic link to a directory") {
		t.Errorf("a symbolic link to a directory: %v, want it refused", err)
	}
}

func TestBaseTree(t *testing.T) {
	ca, n, err := caBundle()
	if err != nil {
		t.Fatal(err)
	}
	base, err := baseTree(ca)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := base.writeTar(&buf, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	hdrs, files := tarHeaders(t, &buf)
	byName := map[string]*tar.Header{}
	for _, h := range hdrs {
		byName[h.Name] = h
	}
	if h := byName["tmp/"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode != 0o1777 {
		t.Errorf("tmp/: %+v, want a directory of mode 1777", h)
	}
	if h := byName["home/nonroot/"]; h == nil || h.Uid != nonrootUID || h.Gid != nonrootUID || h.Mode != 0o700 {
		t.Errorf("home/nonroot/: %+v, want a directory of 65532:65532 mode 0700", h)
	}
	if !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("etc/passwd has no nonroot user: %q", files["etc/passwd"])
	}

	pemBytes := files[strings.TrimPrefix(caBundlePath, "/")]
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("%s holds no certificate", caBundlePath)
	}
	count := 0
	for rest := pemBytes; ; count++ {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			t.Errorf("certificate %d: %v", count, err)
		}
	}
	// Mozilla's store has well over a hundred roots; far fewer means the bundle is broken.
	if count != n || count < 100 {
		t.Errorf("%s holds %d certificates, caBundle reported %d; want the same, at least 100", caBundlePath, count, n)
	}
}
