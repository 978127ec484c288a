package providers

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
)

// writePackage writes an unpacked provider package (an executable and a readme) under mirror.
func writePackage(t *testing.T, mirror, typ, version string) string {
	t.Helper()
	dir := filepath.Join(mirror, "registry.opentofu.org", "example", typ, version, runtime.GOOS+"_"+runtime.GOARCH)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "terraform-provider-"+typ+"_v"+version), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("kit"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPins: a package of the mirror runs only as the engine found it at start. An executable
// planted beside the real one (FindExecutable would pick "terraform-provider-kit" first), a
// version added after the start, a binary changed in place or through the symbolic link the
// mirror holds: each refused with engine.ErrProviderChecksumMismatch. A package outside the
// mirror (the installer's cache) is left to the installer and the object's lock.
func TestPins(t *testing.T) {
	t.Parallel()
	mirror := t.TempDir()
	kit := writePackage(t, mirror, "kit", "0.4.0")
	linked := writePackage(t, mirror, "linked", "1.0.0")
	target := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(target, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(linked, "terraform-provider-linked_v1.0.0")
	if err := os.Remove(exe); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, exe); err != nil {
		t.Fatal(err)
	}
	pins := PinMirror(mirror)
	for _, dir := range []string{kit, linked, t.TempDir()} {
		if err := pins.Verify("example/x", "0", dir); err != nil {
			t.Errorf("%s as pinned: %v", dir, err)
		}
	}

	planted := filepath.Join(kit, "terraform-provider-kit")
	if err := os.WriteFile(planted, []byte("#!/bin/sh\ntouch /tmp/pwned\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := FindExecutable(kit, "kit"); got != planted {
		t.Fatalf("FindExecutable = %s; the attack needs it to pick the planted %s", got, planted)
	}
	newer := writePackage(t, mirror, "kit", "9.9.9")
	f, err := os.OpenFile(target, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("# changed\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for dir, why := range map[string]string{kit: "its files changed", newer: "was not in the mirror", linked: "its files changed"} {
		err := pins.Verify("example/kit", "v", dir)
		var pe *PinError
		if !errors.Is(err, engine.ErrProviderChecksumMismatch) || !errors.As(err, &pe) || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v, want a PinError saying %q", dir, err, why)
		}
	}
	if err := PinMirror("").Verify("example/kit", "v", kit); err != nil {
		t.Errorf("no mirror: %v", err)
	}
}

// TestInstaller_cachedTampered: a package changed in the installer's cache after its verified
// install (an executable planted beside the real one) is refused, not used; one whose install
// recorded no hashes is not taken from the cache.
func TestInstaller_cachedTampered(t *testing.T) {
	t.Parallel()
	in, err := NewInstaller(Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	addr := Addr{Host: "registry.opentofu.org", Namespace: "example", Type: "kit"}
	dir := in.packageDir(addr, "0.4.0")
	writePackage(t, in.CacheDir(), "kit", "0.4.0")
	if _, ok, err := in.Cached(addr, "0.4.0"); ok || err != nil {
		t.Fatalf("a package without recorded hashes: cached %v, %v", ok, err)
	}
	h1, err := PackageHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	hf := in.hashesFile(addr, "0.4.0")
	if err := os.MkdirAll(filepath.Dir(hf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hf, []byte(h1+"\nzh:00\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pkg, ok, err := in.Cached(addr, "0.4.0")
	if err != nil || !ok || pkg.Hashes[0] != h1 {
		t.Fatalf("the verified package: %+v, %v, %v", pkg, ok, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "terraform-provider-kit"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := in.Cached(addr, "0.4.0"); ok || !errors.Is(err, engine.ErrProviderChecksumMismatch) {
		t.Errorf("a tampered cache package: cached %v, %v; want a checksum mismatch", ok, err)
	}
}

// TestPackageHash_symlinkedDir: a package directory that is a symbolic link (a plugin cache
// filled from a local mirror links each package) hashes as the directory it points to; it was
// refused ("is not a directory").
func TestPackageHash_symlinkedDir(t *testing.T) {
	t.Parallel()
	pkg := writePackage(t, t.TempDir(), "kit", "0.4.0")
	want, err := PackageHash(pkg)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "linux_amd64")
	if err := os.Symlink(pkg, link); err != nil {
		t.Fatal(err)
	}
	if got, err := PackageHash(link); err != nil || got != want {
		t.Errorf("PackageHash(link) = %q, %v; want %q", got, err, want)
	}
}
