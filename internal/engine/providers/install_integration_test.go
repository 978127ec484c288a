//go:build integration

package providers_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/platform/testutil/registrytest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// testkitBinary is the real example/testkit provider built by `make tools-testkit`.
func testkitBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(tofutest.EnvTestkitMirror)
	bin := filepath.Join(dir, "registry.opentofu.org/example/testkit", tofutest.TestkitVersion, "linux_amd64",
		"terraform-provider-testkit_v"+tofutest.TestkitVersion)
	if _, err := os.Stat(bin); dir == "" || err != nil {
		t.Fatalf("$%s (%q) does not hold example/testkit %s: run `make tools-testkit`", tofutest.EnvTestkitMirror, dir, tofutest.TestkitVersion)
	}
	return bin
}

func startRegistry(t *testing.T) *registrytest.Registry {
	bin := testkitBinary(t)
	return registrytest.Start(t,
		registrytest.Provider{Namespace: "example", Type: "testkit", Version: "0.2.0", Binary: bin},
		registrytest.Provider{Namespace: "example", Type: "testkit", Version: tofutest.TestkitVersion, Binary: bin})
}

func newInstaller(t *testing.T, reg *registrytest.Registry, cache, mirror string) *providers.Installer {
	t.Helper()
	in, err := providers.NewInstaller(providers.Options{CacheDir: cache, CAFile: reg.CAFile, NetworkMirror: mirror})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestInstaller_registry installs example/testkit through the Provider Registry Protocol from a
// loopback TLS registry: the newest version meeting the constraint, its SHA256SUMS signature
// verified, the package unpacked into the cache with its h1: hash and every zh: of the signed
// SHA256SUMS; concurrent installs by two installers over one cache (as two processes) download
// once; the lock pins the older version; nothing but a trusted CA reaches the server.
func TestInstaller_registry(t *testing.T) {
	reg := startRegistry(t)
	addr := providers.Addr{Host: reg.Host, Namespace: "example", Type: "testkit"}
	cache := t.TempDir()
	ins := []*providers.Installer{newInstaller(t, reg, cache, ""), newInstaller(t, reg, cache, "")}
	var wg sync.WaitGroup
	pkgs := make([]*providers.Package, 8)
	errs := make([]error, 8)
	for i := range pkgs {
		wg.Go(func() { pkgs[i], errs[i] = ins[i%2].Install(t.Context(), addr, ">= 0.2", nil) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("install %d: %v", i, err)
		}
	}
	if n := reg.Downloads(); n != 1 {
		t.Errorf("8 concurrent installs downloaded the archive %d times, want 1", n)
	}
	p := pkgs[0]
	if p.Version != tofutest.TestkitVersion {
		t.Errorf("selected %s, want the newest %s", p.Version, tofutest.TestkitVersion)
	}
	wantDir := filepath.Join(cache, reg.Host, "example", "testkit", p.Version, reg.Platform)
	if p.Dir != wantDir || filepath.Dir(p.Exe) != wantDir {
		t.Errorf("package at %s (%s), want under %s", p.Dir, p.Exe, wantDir)
	}
	h1, err := providers.PackageHash(p.Dir)
	if err != nil {
		t.Fatal(err)
	}
	zh := "zh:" + reg.ArchiveSHA256(registrytest.Provider{Type: "testkit", Version: p.Version})
	if !slices.Contains(p.Hashes, h1) || !slices.Contains(p.Hashes, zh) {
		t.Errorf("hashes %v, want %s and %s", p.Hashes, h1, zh)
	}
	for _, q := range pkgs[1:] {
		if q.Dir != p.Dir || !slices.Equal(q.Hashes, p.Hashes) {
			t.Errorf("concurrent install gave %+v, want %+v", q, p)
		}
	}

	// A lock pins the older version even though a newer one meets the constraint.
	old, err := ins[0].Install(t.Context(), addr, ">= 0.2", &providers.LockEntry{Version: "0.2.0"})
	if err != nil || old.Version != "0.2.0" {
		t.Fatalf("locked install: %+v, %v; want 0.2.0", old, err)
	}
	// The lock's hashes are enforced.
	_, err = ins[0].Install(t.Context(), addr, "", &providers.LockEntry{Version: "0.2.0", Hashes: []string{"h1:AAAA"}})
	if !errors.Is(err, engine.ErrProviderChecksumMismatch) {
		t.Errorf("install against a lock with other hashes: %v, want ErrProviderChecksumMismatch", err)
	}

	// Without the test CA the server is not trusted.
	plain, err := providers.NewInstaller(providers.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Install(t.Context(), addr, "", nil); !errors.Is(err, engine.ErrProviderRegistryUnavailable) ||
		!strings.Contains(err.Error(), "certificate") {
		t.Errorf("install without the CA: %v, want a certificate error (registry unavailable)", err)
	}
}

// TestInstaller_networkMirror installs through the Provider Network Mirror Protocol (index.json,
// <version>.json with a relative archive URL and zh: hashes).
func TestInstaller_networkMirror(t *testing.T) {
	reg := startRegistry(t)
	addr := providers.Addr{Host: "registry.opentofu.org", Namespace: "example", Type: "testkit"}
	in := newInstaller(t, reg, t.TempDir(), reg.MirrorURL)
	p, err := in.Install(t.Context(), addr, "~> 0.2.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != "0.2.0" || !strings.HasPrefix(p.Dir, in.CacheDir()) {
		t.Errorf("got %+v, want 0.2.0 in the cache", p)
	}
	if _, err := os.Stat(p.Exe); err != nil {
		t.Error(err)
	}
}

// TestInstaller_failures: a corrupted archive, a SHA256SUMS signed by a key the registry does
// not list, a version no release meets and a registry that is down each fail with their own
// engine sentinel (the applier's Failed reason), a message naming the provider, and leave
// nothing in the cache.
func TestInstaller_failures(t *testing.T) {
	reg := startRegistry(t)
	addr := providers.Addr{Host: reg.Host, Namespace: "example", Type: "testkit"}
	cases := []struct {
		name       string
		fault      registrytest.Fault
		mirror     bool
		constraint string
		down       bool
		want       error
		text       string
	}{
		{name: "bad checksum", fault: registrytest.CorruptArchive, want: engine.ErrProviderChecksumMismatch, text: "signed SHA256SUMS"},
		{name: "bad checksum from the mirror", fault: registrytest.CorruptArchive, mirror: true, want: engine.ErrProviderChecksumMismatch, text: "network mirror's hashes"},
		{name: "bad signature", fault: registrytest.BadSignature, want: engine.ErrProviderSignatureInvalid, text: "signature"},
		{name: "unknown version", constraint: ">= 9.0", want: engine.ErrProviderVersionNotFound, text: "available: 0.2.0, " + tofutest.TestkitVersion},
		{name: "unknown version from the mirror", constraint: "7.7.7", mirror: true, want: engine.ErrProviderVersionNotFound, text: "7.7.7"},
		{name: "registry down", down: true, want: engine.ErrProviderRegistryUnavailable, text: "connection refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg.SetFault(tc.fault)
			defer reg.SetFault(registrytest.NoFault)
			cache := t.TempDir()
			mirror := ""
			if tc.mirror {
				mirror = reg.MirrorURL
			}
			in := newInstaller(t, reg, cache, mirror)
			a := addr
			if tc.down {
				down := registrytest.Start(t)
				down.Close()
				a.Host = down.Host
			}
			_, err := in.Install(t.Context(), a, tc.constraint, nil)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), "testkit") && !tc.down {
				t.Fatalf("error %v, want %v mentioning %q", err, tc.want, tc.text)
			}
			var installed []string
			_ = filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.Contains(p, "terraform-provider-") {
					installed = append(installed, p)
				}
				return nil
			})
			if len(installed) > 0 {
				t.Errorf("a failed install left %v in the cache", installed)
			}
		})
	}
}

// TestRegistry_tofuOracle runs the real `tofu init` against the same loopback registry (by the
// Provider Registry Protocol, the source address naming the registry's host) and network
// mirror (a CLI config's network_mirror), trusting the test CA through SSL_CERT_FILE: tofu
// accepts the server, verifies the signature and records in its .terraform.lock.hcl the
// hashes the installer computes.
func TestRegistry_tofuOracle(t *testing.T) {
	tools := tofutest.Tofu(t)
	reg := startRegistry(t)
	cases := []struct {
		name, source, cliConfig string
		mirror                  bool
	}{
		{name: "registry", source: reg.Host + "/example/testkit"},
		{name: "network mirror", source: "example/testkit", mirror: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			main := `{"terraform":{"required_providers":{"testkit":{"source":"` + tc.source + `","version":"~> ` + tofutest.TestkitVersion + `"}}}}`
			if err := os.WriteFile(filepath.Join(dir, "main.tf.json"), []byte(main), 0o600); err != nil {
				t.Fatal(err)
			}
			rc := "disable_checkpoint = true\n"
			if tc.mirror {
				rc += "provider_installation {\n  network_mirror {\n    url = \"" + reg.MirrorURL + "\"\n  }\n}\n"
			}
			rcPath := filepath.Join(dir, "tofurc")
			if err := os.WriteFile(rcPath, []byte(rc), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(t.Context(), tools.Bin, "init", "-input=false", "-no-color")
			cmd.Dir = dir
			env := []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "TF_CLI_CONFIG_FILE=" + rcPath,
				"SSL_CERT_FILE=" + reg.CAFile, "CHECKPOINT_DISABLE=1"}
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("tofu init: %v\n%s", err, out)
			}
			if !tc.mirror && !strings.Contains(string(out), "(signed, key ID "+strings.ToUpper(reg.KeyID())+")") {
				t.Errorf("tofu init did not verify the test key's signature:\n%s", out)
			}
			b, err := os.ReadFile(filepath.Join(dir, providers.LockFile))
			if err != nil {
				t.Fatal(err)
			}
			lock, err := providers.ParseLock(b)
			if err != nil {
				t.Fatal(err)
			}
			host := reg.Host
			mirror := ""
			if tc.mirror {
				host, mirror = "registry.opentofu.org", reg.MirrorURL
			}
			addr := providers.Addr{Host: host, Namespace: "example", Type: "testkit"}
			entry, ok := lock[addr.String()]
			if !ok {
				t.Fatalf("tofu's lock has no %s:\n%s", addr, b)
			}
			p, err := newInstaller(t, reg, t.TempDir(), mirror).Install(t.Context(), addr, "~> "+tofutest.TestkitVersion, nil)
			if err != nil {
				t.Fatal(err)
			}
			if entry.Version != p.Version || !slices.Equal(slices.Sorted(slices.Values(entry.Hashes)), p.Hashes) {
				t.Errorf("tofu locked %s %v, the installer %s %v", entry.Version, entry.Hashes, p.Version, p.Hashes)
			}
			if tc.mirror {
				return
			}
			// What the installer refuses, tofu refuses too.
			reg.SetFault(registrytest.BadSignature)
			defer reg.SetFault(registrytest.NoFault)
			_ = os.RemoveAll(filepath.Join(dir, ".terraform"))
			_ = os.Remove(filepath.Join(dir, providers.LockFile))
			cmd = exec.CommandContext(t.Context(), tools.Bin, "init", "-input=false", "-no-color")
			cmd.Dir, cmd.Env = dir, env
			if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "signature") {
				t.Errorf("tofu init with a bad signature: %v, want a signature error\n%s", err, out)
			}
		})
	}
}
