package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/lava-operator/lava/internal/engine"
)

// maxDocumentBytes bounds a JSON document, SHA256SUMS file or signature read from a registry.
const maxDocumentBytes = 4 << 20

// discovery caches each host's providers.v1 base URL (service discovery).
type discovery struct {
	mu sync.Mutex
	m  map[string]string
}

// get issues a GET; a transport failure or a status other than 200 is a *RegistryError
// (404 keeps http.StatusNotFound in notFound).
func (in *Installer) get(ctx context.Context, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, &RegistryError{URL: u, Err: err}
	}
	resp, err := in.client.Do(req)
	if err != nil {
		return nil, &RegistryError{URL: u, Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, &RegistryError{URL: u, Err: statusError(resp.StatusCode)}
	}
	return resp, nil
}

// statusError is a non-200 answer.
type statusError int

func (s statusError) Error() string {
	return fmt.Sprintf("HTTP %d %s", int(s), http.StatusText(int(s)))
}

func isNotFound(err error) bool {
	var s statusError
	return errors.As(err, &s) && int(s) == http.StatusNotFound
}

// getBytes reads a whole (bounded) document.
func (in *Installer) getBytes(ctx context.Context, u string) ([]byte, error) {
	resp, err := in.get(ctx, u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return nil, &RegistryError{URL: u, Err: err}
	}
	if len(b) > maxDocumentBytes {
		return nil, &RegistryError{URL: u, Err: fmt.Errorf("answer exceeds %d bytes", maxDocumentBytes)}
	}
	return b, nil
}

func (in *Installer) getJSON(ctx context.Context, u string, v any) error {
	b, err := in.getBytes(ctx, u)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return &RegistryError{URL: u, Err: fmt.Errorf("malformed answer: %w", err)}
	}
	return nil
}

// providersBase returns the host's providers.v1 URL from /.well-known/terraform.json.
func (in *Installer) providersBase(ctx context.Context, host string) (*url.URL, error) {
	in.disco.mu.Lock()
	base, ok := in.disco.m[host]
	in.disco.mu.Unlock()
	if !ok {
		wk := "https://" + host + "/.well-known/terraform.json"
		var doc map[string]any
		if err := in.getJSON(ctx, wk, &doc); err != nil {
			return nil, err
		}
		s, _ := doc["providers.v1"].(string)
		if s == "" {
			return nil, &RegistryError{URL: wk, Err: errors.New("the host offers no providers.v1 service")}
		}
		base = s
		in.disco.mu.Lock()
		in.disco.m[host] = base
		in.disco.mu.Unlock()
	}
	ref, err := url.Parse(base)
	if err != nil {
		return nil, &RegistryError{URL: base, Err: err}
	}
	u := (&url.URL{Scheme: "https", Host: host, Path: "/.well-known/terraform.json"}).ResolveReference(ref)
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// resolve joins a relative reference to base.
func resolve(base *url.URL, ref string) (string, error) {
	r, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	return base.ResolveReference(r).String(), nil
}

// versions lists the versions the source offers for this platform.
func (in *Installer) versions(ctx context.Context, addr Addr) ([]string, error) {
	if in.opts.NetworkMirror != "" {
		u := in.opts.NetworkMirror + addr.Host + "/" + addr.Namespace + "/" + addr.Type + "/index.json"
		var doc struct {
			Versions map[string]json.RawMessage `json:"versions"`
		}
		if err := in.getJSON(ctx, u, &doc); err != nil {
			if isNotFound(err) {
				return nil, unknownProvider(addr, "the network mirror "+in.opts.NetworkMirror)
			}
			return nil, err
		}
		out := make([]string, 0, len(doc.Versions))
		for v := range doc.Versions {
			out = append(out, v)
		}
		sort.Strings(out)
		return out, nil
	}
	base, err := in.providersBase(ctx, addr.Host)
	if err != nil {
		return nil, err
	}
	u, err := resolve(base, addr.Namespace+"/"+addr.Type+"/versions")
	if err != nil {
		return nil, &RegistryError{URL: base.String(), Err: err}
	}
	var doc struct {
		Versions []struct {
			Version   string `json:"version"`
			Platforms []struct {
				OS   string `json:"os"`
				Arch string `json:"arch"`
			} `json:"platforms"`
		} `json:"versions"`
	}
	if err := in.getJSON(ctx, u, &doc); err != nil {
		if isNotFound(err) {
			return nil, unknownProvider(addr, "the registry "+addr.Host)
		}
		return nil, err
	}
	var out []string
	for _, v := range doc.Versions {
		for _, p := range v.Platforms {
			if p.OS+"_"+p.Arch == in.opts.Platform {
				out = append(out, v.Version)
				break
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// releaseInfo is where an archive comes from and what it must hash to.
type releaseInfo struct {
	url string
	// fromRegistry: sums is the signed SHA256SUMS (name -> hex), filename the archive's name.
	fromRegistry bool
	filename     string
	sums         map[string]string
	shasum       string
	// from a network mirror: the hashes it lists (h1: and/or zh:).
	mirrorHashes []string
}

// release locates version ver of addr for this platform and, from a registry, fetches and
// verifies the signed SHA256SUMS.
func (in *Installer) release(ctx context.Context, addr Addr, ver string) (*releaseInfo, error) {
	if in.opts.NetworkMirror != "" {
		return in.mirrorRelease(ctx, addr, ver)
	}
	return in.registryRelease(ctx, addr, ver)
}

// mirrorRelease locates version ver of addr for this platform on the network mirror: the
// archive's URL and the hashes the mirror lists for it (at least one).
func (in *Installer) mirrorRelease(ctx context.Context, addr Addr, ver string) (*releaseInfo, error) {
	u := in.opts.NetworkMirror + addr.Host + "/" + addr.Namespace + "/" + addr.Type + "/" + ver + ".json"
	var doc struct {
		Archives map[string]struct {
			URL    string   `json:"url"`
			Hashes []string `json:"hashes"`
		} `json:"archives"`
	}
	if err := in.getJSON(ctx, u, &doc); err != nil {
		if isNotFound(err) {
			return nil, &VersionNotFoundError{Addr: addr, Constraint: ver}
		}
		return nil, err
	}
	a, ok := doc.Archives[in.opts.Platform]
	if !ok {
		return nil, &VersionNotFoundError{Addr: addr, Constraint: ver}
	}
	if len(a.Hashes) == 0 {
		return nil, &ChecksumError{Addr: addr, Version: ver, What: "the network mirror's hashes (it lists none)"}
	}
	base, _ := url.Parse(u)
	full, err := resolve(base, a.URL)
	if err != nil {
		return nil, &RegistryError{URL: u, Err: err}
	}
	return &releaseInfo{url: full, mirrorHashes: a.Hashes}, nil
}

// gpgPublicKey is one signing key of a registry's download answer.
type gpgPublicKey struct {
	KeyID      string `json:"key_id"`
	ASCIIArmor string `json:"ascii_armor"`
}

// registryRelease locates version ver of addr for this platform through the registry's
// download answer, then fetches its SHA256SUMS and their signature and verifies them
// ([signedSums]); the SHA256SUMS must list the archive.
func (in *Installer) registryRelease(ctx context.Context, addr Addr, ver string) (*releaseInfo, error) {
	base, err := in.providersBase(ctx, addr.Host)
	if err != nil {
		return nil, err
	}
	os, arch, _ := strings.Cut(in.opts.Platform, "_")
	u, err := resolve(base, addr.Namespace+"/"+addr.Type+"/"+ver+"/download/"+os+"/"+arch)
	if err != nil {
		return nil, &RegistryError{URL: base.String(), Err: err}
	}
	var doc struct {
		Filename            string `json:"filename"`
		DownloadURL         string `json:"download_url"`
		SHASumsURL          string `json:"shasums_url"`
		SHASumsSignatureURL string `json:"shasums_signature_url"`
		SHASum              string `json:"shasum"`
		SigningKeys         struct {
			GPGPublicKeys []gpgPublicKey `json:"gpg_public_keys"`
		} `json:"signing_keys"`
	}
	if err := in.getJSON(ctx, u, &doc); err != nil {
		if isNotFound(err) {
			return nil, &VersionNotFoundError{Addr: addr, Constraint: ver}
		}
		return nil, err
	}
	ref, _ := url.Parse(u)
	abs := func(s string) (string, error) {
		if s == "" {
			return "", &RegistryError{URL: u, Err: errors.New("the download answer lacks a URL")}
		}
		return resolve(ref, s)
	}
	dl, err := abs(doc.DownloadURL)
	if err != nil {
		return nil, err
	}
	sumsURL, err := abs(doc.SHASumsURL)
	if err != nil {
		return nil, err
	}
	sigURL, err := abs(doc.SHASumsSignatureURL)
	if err != nil {
		return nil, err
	}
	sums, err := in.getBytes(ctx, sumsURL)
	if err != nil {
		return nil, err
	}
	sig, err := in.getBytes(ctx, sigURL)
	if err != nil {
		return nil, err
	}
	table, err := signedSums(addr, ver, sums, sig, doc.SigningKeys.GPGPublicKeys)
	if err != nil {
		return nil, err
	}
	if _, ok := table[doc.Filename]; !ok || doc.Filename == "" {
		return nil, &ChecksumError{Addr: addr, Version: ver, What: "the signed SHA256SUMS (it does not list " + doc.Filename + ")"}
	}
	return &releaseInfo{url: dl, fromRegistry: true, filename: doc.Filename, sums: table, shasum: strings.ToLower(doc.SHASum)}, nil
}

// signedSums checks the detached OpenPGP signature sig of the SHA256SUMS document sums of
// version ver of addr against keys (at least one) and returns its table (file name ->
// lower-case hex SHA-256). A bad key, no key or a bad signature is a [*SignatureError].
func signedSums(addr Addr, ver string, sums, sig []byte, keys []gpgPublicKey) (map[string]string, error) {
	var keyring openpgp.EntityList
	for _, k := range keys {
		el, err := openpgp.ReadArmoredKeyRing(strings.NewReader(k.ASCIIArmor))
		if err != nil {
			return nil, &SignatureError{Addr: addr, Version: ver, Err: fmt.Errorf("signing key %s: %w", k.KeyID, err)}
		}
		keyring = append(keyring, el...)
	}
	if len(keyring) == 0 {
		return nil, &SignatureError{Addr: addr, Version: ver, Err: errors.New("the registry lists no signing key")}
	}
	if _, err := openpgp.CheckDetachedSignature(keyring, bytes.NewReader(sums), bytes.NewReader(sig), nil); err != nil {
		return nil, &SignatureError{Addr: addr, Version: ver, Err: err}
	}
	table := map[string]string{}
	for _, line := range strings.Split(string(sums), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			table[f[1]] = strings.ToLower(f[0])
		}
	}
	return table, nil
}

// verifyArchive checks the archive's zh: hash against the signed SHA256SUMS (and the download
// answer's shasum) or the mirror's zh: hashes.
func (r *releaseInfo) verifyArchive(addr Addr, ver, zh string) error {
	got := strings.TrimPrefix(zh, "zh:")
	if r.fromRegistry {
		want := r.sums[r.filename]
		if got != want || (r.shasum != "" && r.shasum != want) {
			return &ChecksumError{Addr: addr, Version: ver, What: "the signed SHA256SUMS", Got: []string{zh}, Want: []string{"zh:" + want}}
		}
		return nil
	}
	var zhs []string
	for _, h := range r.mirrorHashes {
		if strings.HasPrefix(h, "zh:") {
			zhs = append(zhs, h)
		}
	}
	if len(zhs) > 0 && !slices.Contains(zhs, zh) {
		return &ChecksumError{Addr: addr, Version: ver, What: "the network mirror's hashes", Got: []string{zh}, Want: zhs}
	}
	return nil
}

// verifyPackage checks the unpacked package's h1: hash against the mirror's h1: hashes (and,
// when it lists only h1:, that one matched).
func (r *releaseInfo) verifyPackage(addr Addr, ver, h1 string) error {
	if r.fromRegistry {
		return nil
	}
	var h1s []string
	for _, h := range r.mirrorHashes {
		if strings.HasPrefix(h, "h1:") {
			h1s = append(h1s, h)
		}
	}
	if len(h1s) > 0 && !slices.Contains(h1s, h1) {
		return &ChecksumError{Addr: addr, Version: ver, What: "the network mirror's hashes", Got: []string{h1}, Want: h1s}
	}
	if len(h1s) == 0 && !slices.ContainsFunc(r.mirrorHashes, func(h string) bool { return strings.HasPrefix(h, "zh:") }) {
		return &ChecksumError{Addr: addr, Version: ver, What: "the network mirror's hashes (none of a known scheme)", Got: []string{h1}, Want: r.mirrorHashes}
	}
	return nil
}

// lockHashes are the zh: hashes a lock records beside the h1:: from a registry every archive
// of the signed SHA256SUMS (every platform, as `tofu init` records), from a mirror its list.
func (r *releaseInfo) lockHashes(zh string) []string {
	if !r.fromRegistry {
		return append([]string{zh}, r.mirrorHashes...)
	}
	out := []string{}
	for name, sum := range r.sums {
		if strings.HasSuffix(name, ".zip") {
			out = append(out, "zh:"+sum)
		}
	}
	return out
}

// unknownProvider is a provider the source does not have at all.
func unknownProvider(addr Addr, where string) error {
	return &engine.ProviderUnavailableError{Sources: []string{addr.String()}, Detail: where + " has no such provider"}
}
