package providers

import (
	"archive/zip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gofrs/flock"
	"github.com/hashicorp/go-version"
	"github.com/spf13/pflag"
	"golang.org/x/sync/singleflight"

	"github.com/lava-operator/lava/internal/engine"
)

// Addr is a provider's registry address: host/namespace/type.
type Addr struct {
	Host, Namespace, Type string
}

// String is "registry.opentofu.org/hashicorp/local".
func (a Addr) String() string { return a.Host + "/" + a.Namespace + "/" + a.Type }

// Options configures an [Installer].
type Options struct {
	// CacheDir is the shared provider cache on disk, laid out like OpenTofu's unpacked
	// filesystem mirror (<host>/<namespace>/<type>/<version>/<os>_<arch>/); required.
	// Installs into it are serialised per package across processes by a file lock
	// (CacheDir/.lava/locks).
	CacheDir string
	// NetworkMirror is the base URL of a Provider Network Mirror Protocol server
	// ("https://mirror.example/providers/"). When set every provider is installed from it,
	// as OpenTofu's network_mirror installation method does; otherwise from its own registry
	// host by the Provider Registry Protocol.
	NetworkMirror string
	// CAFile is a PEM bundle of certificate authorities trusted for registries and mirrors in
	// addition to the system's (a private registry's CA; a test's CA).
	CAFile string
	// HTTPClient overrides the client built from CAFile.
	HTTPClient *http.Client
	// Platform is the os_arch installed (default runtime.GOOS_runtime.GOARCH).
	Platform string
	// MaxArchiveBytes bounds a downloaded archive (default 1 GiB).
	MaxArchiveBytes int64
}

// RegisterFlags defines the installation flags of a process that runs engines on fs:
// --provider-cache-dir, --provider-network-mirror, --provider-ca-file.
func (o *Options) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.CacheDir, "provider-cache-dir", "", "shared provider cache: providers the mirror directory lacks are installed here from their registry or --provider-network-mirror (empty: the mirror directory only)")
	fs.StringVar(&o.NetworkMirror, "provider-network-mirror", "", "base URL of a Provider Network Mirror Protocol server to install every provider from (default: each provider's own registry)")
	fs.StringVar(&o.CAFile, "provider-ca-file", "", "PEM bundle of certificate authorities trusted for provider registries and mirrors, besides the system's")
}

// Installer installs providers as `tofu init` does: versions selected by constraint (or the
// dependency lock), archives fetched from the registry or a network mirror, verified
// (SHA256SUMS and its OpenPGP signature, the mirror's hashes, the lock's hashes) and unpacked
// into the shared cache. Concurrent installs of one package in a process run once
// (singleflight), across processes once (a file lock). Safe for concurrent use.
type Installer struct {
	opts   Options
	client *http.Client
	group  singleflight.Group
	disco  discovery
	// hashes caches the h1: hashes of cached packages ([Installer.Cached]).
	hashes HashCache
}

// installTimeout bounds one package's install (waiting for another process's file lock,
// fetching, verifying, unpacking).
const installTimeout = 15 * time.Minute

// Package is an installed provider.
type Package struct {
	Addr    Addr
	Version string
	// Dir is the unpacked package directory in the cache; Exe the executable in it.
	Dir, Exe string
	// Hashes are what a dependency lock records for it: the h1: hash of Dir and, when
	// installed from a registry, the zh: hash of every archive the signed SHA256SUMS lists
	// (from a network mirror: the hashes it lists).
	Hashes []string
}

// NewInstaller returns an installer; a CAFile that cannot be read is an error.
func NewInstaller(opts Options) (*Installer, error) {
	if opts.CacheDir == "" {
		return nil, errors.New("providers: no cache directory")
	}
	abs, err := filepath.Abs(opts.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("providers: cache directory: %w", err)
	}
	opts.CacheDir = abs
	if err := os.MkdirAll(filepath.Join(abs, ".lava", "locks"), 0o755); err != nil {
		return nil, fmt.Errorf("providers: cache directory: %w", err)
	}
	if opts.Platform == "" {
		opts.Platform = runtime.GOOS + "_" + runtime.GOARCH
	}
	if opts.MaxArchiveBytes <= 0 {
		opts.MaxArchiveBytes = 1 << 30
	}
	if opts.NetworkMirror != "" && !strings.HasSuffix(opts.NetworkMirror, "/") {
		opts.NetworkMirror += "/"
	}
	client := opts.HTTPClient
	if client == nil {
		roots, err := x509.SystemCertPool()
		if err != nil || roots == nil {
			roots = x509.NewCertPool()
		}
		if opts.CAFile != "" {
			pem, err := os.ReadFile(opts.CAFile)
			if err != nil {
				return nil, fmt.Errorf("providers: CA file: %w", err)
			}
			if !roots.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("providers: CA file %s holds no PEM certificate", opts.CAFile)
			}
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		client = &http.Client{Transport: tr, Timeout: 5 * time.Minute}
	}
	return &Installer{opts: opts, client: client, disco: discovery{m: map[string]string{}}}, nil
}

// CacheDir is the cache directory (absolute).
func (in *Installer) CacheDir() string { return in.opts.CacheDir }

// Install returns the provider package for addr: the locked version when lock has one that
// meets constraint (go-version syntax, "" for any), else the newest version the source offers
// that does. A package already in the cache is not fetched again. The package's hashes must
// include one of lock's when lock names that version. Errors wrap
// [engine.ErrProviderVersionNotFound], [engine.ErrProviderRegistryUnavailable],
// [engine.ErrProviderChecksumMismatch] or [engine.ErrProviderSignatureInvalid].
func (in *Installer) Install(ctx context.Context, addr Addr, constraint string, lock *LockEntry) (*Package, error) {
	want, err := ParseConstraint(constraint)
	if err != nil {
		return nil, fmt.Errorf("%s: version constraint %q: %w", addr, constraint, err)
	}
	ver := ""
	if lock != nil && lock.Version != "" {
		if v, err := version.NewVersion(lock.Version); err == nil && want.Check(v) {
			ver = v.Original()
		}
	}
	if v, ok := ExactVersion(constraint); ver == "" && ok {
		ver = v
	}
	if ver == "" {
		if ver, err = in.selectVersion(ctx, addr, want, constraint); err != nil {
			return nil, err
		}
	}
	key := addr.String() + "@" + ver + "/" + in.opts.Platform
	// The install runs on for the other callers waiting on it when this one gives up; it is
	// bounded by installTimeout.
	ch := in.group.DoChan(key, func() (any, error) {
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), installTimeout)
		defer cancel()
		return in.install(ictx, addr, ver)
	})
	var res singleflight.Result
	select {
	case res = <-ch:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s %s: install: %w", addr, ver, ctx.Err())
	}
	if res.Err != nil {
		return nil, res.Err
	}
	pkg := res.Val.(*Package)
	if lock != nil && lock.Version == ver && len(lock.Hashes) > 0 && !matchesAny(pkg.Hashes, lock.Hashes) {
		return nil, &ChecksumError{Addr: addr, Version: ver, What: "the dependency lock's hashes",
			Got: pkg.Hashes, Want: lock.Hashes}
	}
	return pkg, nil
}

func matchesAny(have, want []string) bool {
	for _, h := range have {
		if slices.Contains(want, h) {
			return true
		}
	}
	return false
}

// selectVersion lists the source's versions and picks the newest that meets want.
func (in *Installer) selectVersion(ctx context.Context, addr Addr, want version.Constraints, constraint string) (string, error) {
	vs, err := in.versions(ctx, addr)
	if err != nil {
		return "", err
	}
	var best *version.Version
	for _, s := range vs {
		v, err := version.NewVersion(s)
		if err != nil || !want.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best = v
		}
	}
	if best == nil {
		return "", &VersionNotFoundError{Addr: addr, Constraint: constraint, Available: vs}
	}
	return best.Original(), nil
}

func (in *Installer) packageDir(addr Addr, ver string) string {
	return filepath.Join(in.opts.CacheDir, addr.Host, addr.Namespace, addr.Type, ver, in.opts.Platform)
}

func (in *Installer) hashesFile(addr Addr, ver string) string {
	return filepath.Join(in.opts.CacheDir, ".lava", "hashes", addr.Host, addr.Namespace, addr.Type, ver+"_"+in.opts.Platform)
}

// Cached returns the package of addr at version ver when the cache holds it, verified: its
// h1: hash must be one the install recorded (the cache's .lava/hashes entry), so a package
// changed in the cache after its verified install is never used (the error wraps
// [engine.ErrProviderChecksumMismatch]). A package with no recorded hashes is not cached (it
// is installed again).
func (in *Installer) Cached(addr Addr, ver string) (*Package, bool, error) {
	return in.cached(addr, ver)
}

func (in *Installer) cached(addr Addr, ver string) (*Package, bool, error) {
	dir := in.packageDir(addr, ver)
	exe := FindExecutable(dir, addr.Type)
	if exe == "" {
		return nil, false, nil
	}
	b, err := os.ReadFile(in.hashesFile(addr, ver))
	if err != nil {
		return nil, false, nil
	}
	recorded := strings.Fields(string(b))
	h1, err := in.hashes.Hash(dir)
	if err != nil {
		return nil, false, err
	}
	if !slices.Contains(recorded, h1) {
		return nil, false, &ChecksumError{Addr: addr, Version: ver, What: "the hashes recorded when it was installed into the cache",
			Got: []string{h1}, Want: recorded}
	}
	hashes := []string{h1}
	for _, h := range recorded {
		if h != h1 {
			hashes = append(hashes, h)
		}
	}
	return &Package{Addr: addr, Version: ver, Dir: dir, Exe: exe, Hashes: hashes}, true, nil
}

// install fetches, verifies and unpacks one package unless the cache has it, holding the
// package's file lock.
func (in *Installer) install(ctx context.Context, addr Addr, ver string) (*Package, error) {
	if p, ok, err := in.cached(addr, ver); ok || err != nil {
		return p, err
	}
	name := strings.NewReplacer("/", "_", ":", "_").Replace(addr.String() + "_" + ver + "_" + in.opts.Platform)
	fl := flock.New(filepath.Join(in.opts.CacheDir, ".lava", "locks", name+".lock"))
	if ok, err := fl.TryLockContext(ctx, 50*time.Millisecond); err != nil || !ok {
		return nil, fmt.Errorf("%s %s: cache lock: %w", addr, ver, errors.Join(err, ctx.Err()))
	}
	defer func() { _ = fl.Unlock() }()
	if p, ok, err := in.cached(addr, ver); ok || err != nil {
		return p, err
	}
	rel, err := in.release(ctx, addr, ver)
	if err != nil {
		return nil, err
	}
	parent := filepath.Dir(in.packageDir(addr, ver))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("%s %s: cache: %w", addr, ver, err)
	}
	tmp, err := os.MkdirTemp(parent, ".install-")
	if err != nil {
		return nil, fmt.Errorf("%s %s: cache: %w", addr, ver, err)
	}
	defer os.RemoveAll(tmp)
	zipPath := filepath.Join(tmp, "package.zip")
	if err := in.download(ctx, rel.url, zipPath); err != nil {
		return nil, fmt.Errorf("%s %s: %w", addr, ver, err)
	}
	zh, err := ZipHash(zipPath)
	if err != nil {
		return nil, err
	}
	if err := rel.verifyArchive(addr, ver, zh); err != nil {
		return nil, err
	}
	unpacked := filepath.Join(tmp, "pkg")
	if err := unzip(zipPath, unpacked, in.opts.MaxArchiveBytes); err != nil {
		return nil, fmt.Errorf("%s %s: unpack %s: %w", addr, ver, rel.url, err)
	}
	h1, err := PackageHash(unpacked)
	if err != nil {
		return nil, err
	}
	if err := rel.verifyPackage(addr, ver, h1); err != nil {
		return nil, err
	}
	if FindExecutable(unpacked, addr.Type) == "" {
		return nil, fmt.Errorf("%s %s: the archive holds no executable terraform-provider-%s", addr, ver, addr.Type)
	}
	hashes := append([]string{h1}, rel.lockHashes(zh)...)
	hashes = slices.Compact(slices.Sorted(slices.Values(hashes)))
	hf := in.hashesFile(addr, ver)
	if err := os.MkdirAll(filepath.Dir(hf), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(hf, []byte(strings.Join(hashes, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	dst := in.packageDir(addr, ver)
	_ = os.RemoveAll(dst) // an incomplete directory without an executable
	if err := os.Rename(unpacked, dst); err != nil {
		return nil, fmt.Errorf("%s %s: cache: %w", addr, ver, err)
	}
	return &Package{Addr: addr, Version: ver, Dir: dst, Exe: FindExecutable(dst, addr.Type), Hashes: hashes}, nil
}

// download writes url's body to path, bounded by MaxArchiveBytes.
func (in *Installer) download(ctx context.Context, url, path string) error {
	resp, err := in.get(ctx, url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(resp.Body, in.opts.MaxArchiveBytes+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &RegistryError{URL: url, Err: err}
	}
	if n > in.opts.MaxArchiveBytes {
		return fmt.Errorf("archive %s exceeds %d bytes", url, in.opts.MaxArchiveBytes)
	}
	return nil
}

// unzip extracts a provider archive into dir: regular files only, no path leaving dir, at most
// limit bytes in all.
func unzip(zipPath, dir string, limit int64) error {
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		return err
	}
	defer zr.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var total int64
	for _, f := range zr.File {
		name := filepath.FromSlash(f.Name)
		if !filepath.IsLocal(name) {
			return fmt.Errorf("entry %q leaves the package directory", f.Name)
		}
		dst := filepath.Join(dir, name)
		if f.FileInfo().IsDir() {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			continue
		}
		if !f.Mode().IsRegular() {
			return fmt.Errorf("entry %q is not a regular file", f.Name)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, f.Mode().Perm()|0o600)
		if err != nil {
			rc.Close()
			return err
		}
		n, err := io.Copy(out, io.LimitReader(rc, limit-total+1))
		rc.Close()
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if total += n; total > limit {
			return fmt.Errorf("archive unpacks to more than %d bytes", limit)
		}
	}
	return nil
}

// FindExecutable returns the provider executable in dir (a file named terraform-provider-TYPE*
// with an execute bit) ("" when there is none).
func FindExecutable(dir, typ string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasPrefix(e.Name(), "terraform-provider-"+typ) {
			continue
		}
		info, err := e.Info()
		if err == nil && info.Mode()&0o111 != 0 {
			return filepath.Join(dir, e.Name())
		}
	}
	return ""
}

// ParseConstraint reads a version constraint (hashicorp/go-version syntax, as
// required_providers writes it: "~> 1.4", ">= 1.2, < 2.0", "1.4.0"); "" allows every
// version. A bare version may carry a leading "v".
func ParseConstraint(c string) (version.Constraints, error) {
	c = strings.TrimSpace(c)
	if c == "" {
		c = ">= 0.0.0"
	}
	c = strings.TrimPrefix(c, "v")
	return version.NewConstraint(c)
}

// ExactVersion reports whether constraint names one version ("1.4.0", "= 1.4.0", "v1.4.0")
// and returns it.
func ExactVersion(constraint string) (string, bool) {
	c := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(constraint), "="))
	v, err := version.NewVersion(strings.TrimPrefix(c, "v"))
	if err != nil {
		return "", false
	}
	return v.Original(), true
}

// VersionNotFoundError is a provider the source has in no version meeting the constraint.
type VersionNotFoundError struct {
	Addr       Addr
	Constraint string
	Available  []string
}

func (e *VersionNotFoundError) Error() string {
	c := e.Constraint
	if c == "" {
		c = "any version"
	}
	return fmt.Sprintf("provider %s: no version matches %q for this platform (available: %s)", e.Addr, c, strings.Join(e.Available, ", "))
}

// Unwrap returns [engine.ErrProviderVersionNotFound].
func (e *VersionNotFoundError) Unwrap() error { return engine.ErrProviderVersionNotFound }

// RegistryError is a registry or mirror request that failed.
type RegistryError struct {
	URL string
	Err error
}

func (e *RegistryError) Error() string {
	return fmt.Sprintf("provider registry request %s failed: %v", e.URL, e.Err)
}

// Unwrap returns the cause and [engine.ErrProviderRegistryUnavailable].
func (e *RegistryError) Unwrap() []error {
	return []error{e.Err, engine.ErrProviderRegistryUnavailable}
}

// ChecksumError is an archive or package whose hash is not the one it must have.
type ChecksumError struct {
	Addr    Addr
	Version string
	// What names the reference: "the signed SHA256SUMS", "the network mirror's hashes", "the
	// dependency lock's hashes".
	What      string
	Got, Want []string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("provider %s %s does not match %s: it hashes to %v, expected one of %v; it was not installed",
		e.Addr, e.Version, e.What, e.Got, e.Want)
}

// Unwrap returns [engine.ErrProviderChecksumMismatch].
func (e *ChecksumError) Unwrap() error { return engine.ErrProviderChecksumMismatch }

// SignatureError is a SHA256SUMS whose OpenPGP signature does not verify.
type SignatureError struct {
	Addr    Addr
	Version string
	Err     error
}

func (e *SignatureError) Error() string {
	return fmt.Sprintf("provider %s %s: SHA256SUMS signature does not verify against the registry's signing keys: %v; it was not installed",
		e.Addr, e.Version, e.Err)
}

// Unwrap returns [engine.ErrProviderSignatureInvalid].
func (e *SignatureError) Unwrap() error { return engine.ErrProviderSignatureInvalid }
