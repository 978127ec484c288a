// Package registrytest runs a provider registry on loopback for tests: the Provider Registry
// Protocol (service discovery at /.well-known/terraform.json, providers.v1 versions and
// download endpoints, SHA256SUMS with an OpenPGP detached signature by a key generated for the
// test) and the Provider Network Mirror Protocol (index.json, <version>.json) under /mirror/,
// over TLS (net/http/httptest) with the server's certificate written to a PEM file for
// clients to trust. The archives are real: zip files of provider binaries the test hands in.
package registrytest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

// Provider is one provider release the registry serves for this machine's platform.
type Provider struct {
	// Namespace and Type form the address's tail ("example", "testkit").
	Namespace, Type string
	// Version is the release ("0.3.0").
	Version string
	// Binary is the provider executable; it is zipped as terraform-provider-TYPE_vVERSION.
	Binary string
}

// Fault is a way the registry misbehaves, for the failure tests.
type Fault int

const (
	// NoFault serves everything as published.
	NoFault Fault = iota
	// CorruptArchive serves archives with one byte changed (they no longer match SHA256SUMS
	// or the mirror's hashes).
	CorruptArchive
	// BadSignature serves a SHA256SUMS signature made by another key than the one the
	// download endpoint lists.
	BadSignature
)

// Registry is the running server.
type Registry struct {
	// URL is "https://127.0.0.1:PORT"; Host is "127.0.0.1:PORT", the registry host of a
	// provider source address ("127.0.0.1:PORT/example/testkit").
	URL, Host string
	// MirrorURL is the network mirror's base URL (URL + "/mirror/").
	MirrorURL string
	// CAFile is a PEM file with the server's certificate: trust it to reach the server.
	CAFile string
	// Platform is the os_arch the archives are for.
	Platform string

	srv      *httptest.Server
	key      *openpgp.Entity
	other    *openpgp.Entity
	archives map[string][]byte // file name -> zip
	releases map[string][]Provider
	fault    atomic.Int32
	mu       sync.Mutex
	hits     map[string]int
}

// Start builds the archives, signs their SHA256SUMS with a new key and serves them until the
// test ends.
func Start(t testing.TB, providers ...Provider) *Registry {
	t.Helper()
	r := &Registry{archives: map[string][]byte{}, releases: map[string][]Provider{}, hits: map[string]int{},
		Platform: runtime.GOOS + "_" + runtime.GOARCH}
	var err error
	if r.key, err = openpgp.NewEntity("Lava test registry", "", "registry@lava.test", nil); err != nil {
		t.Fatal(err)
	}
	if r.other, err = openpgp.NewEntity("Someone else", "", "other@lava.test", nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range providers {
		exe, err := os.ReadFile(p.Binary)
		if err != nil {
			t.Fatalf("registrytest: %v", err)
		}
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		h := &zip.FileHeader{Name: "terraform-provider-" + p.Type + "_v" + p.Version, Method: zip.Deflate}
		h.SetMode(0o755)
		w, err := zw.CreateHeader(h)
		if err == nil {
			_, err = w.Write(exe)
		}
		if err == nil {
			err = zw.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		r.archives[r.archiveName(p)] = buf.Bytes()
		k := p.Namespace + "/" + p.Type
		r.releases[k] = append(r.releases[k], p)
	}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	r.URL = r.srv.URL
	u, _ := url.Parse(r.URL)
	r.Host = u.Host
	r.MirrorURL = r.URL + "/mirror/"
	r.CAFile = filepath.Join(t.TempDir(), "registry-ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	if err := os.WriteFile(r.CAFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// SetFault makes the registry misbehave from now on.
func (r *Registry) SetFault(f Fault) { r.fault.Store(int32(f)) }

// Close stops the server (a registry that is down).
func (r *Registry) Close() { r.srv.Close() }

// Downloads is how many times an archive was fetched.
func (r *Registry) Downloads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for p, c := range r.hits {
		if strings.HasSuffix(p, ".zip") {
			n += c
		}
	}
	return n
}

// ArchiveSHA256 is the hex SHA-256 of a release's zip (the zh: hash without its prefix).
func (r *Registry) ArchiveSHA256(p Provider) string {
	sum := sha256.Sum256(r.archives[r.archiveName(p)])
	return hex.EncodeToString(sum[:])
}

// KeyID is the signing key's id (16 hex digits).
func (r *Registry) KeyID() string { return r.key.PrimaryKey.KeyIdString() }

func (r *Registry) archiveName(p Provider) string {
	return fmt.Sprintf("terraform-provider-%s_%s_%s.zip", p.Type, p.Version, r.Platform)
}

func armored(e *openpgp.Entity) string {
	var b bytes.Buffer
	w, _ := armor.Encode(&b, openpgp.PublicKeyType, nil)
	_ = e.Serialize(w)
	_ = w.Close()
	return b.String()
}

func (r *Registry) sums(ns, typ, ver string) []byte {
	var lines []string
	for _, p := range r.releases[ns+"/"+typ] {
		if p.Version != ver {
			continue
		}
		sum := sha256.Sum256(r.archives[r.archiveName(p)])
		lines = append(lines, hex.EncodeToString(sum[:])+"  "+r.archiveName(p))
	}
	sort.Strings(lines)
	return []byte(strings.Join(lines, "\n") + "\n")
}

func (r *Registry) release(ns, typ, ver string) (Provider, bool) {
	for _, p := range r.releases[ns+"/"+typ] {
		if p.Version == ver {
			return p, true
		}
	}
	return Provider{}, false
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.hits[req.URL.Path]++
	r.mu.Unlock()
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	fault := Fault(r.fault.Load())
	switch {
	case req.URL.Path == "/.well-known/terraform.json":
		writeJSON(w, map[string]string{"providers.v1": "/v1/providers/"})
	case len(parts) == 5 && parts[0] == "v1" && parts[1] == "providers" && parts[4] == "versions":
		rels := r.releases[parts[2]+"/"+parts[3]]
		if len(rels) == 0 {
			http.NotFound(w, req)
			return
		}
		type platform struct {
			OS   string `json:"os"`
			Arch string `json:"arch"`
		}
		var vs []map[string]any
		for _, p := range rels {
			vs = append(vs, map[string]any{"version": p.Version, "protocols": []string{"5.0", "6.0"},
				"platforms": []platform{{runtime.GOOS, runtime.GOARCH}}})
		}
		writeJSON(w, map[string]any{"versions": vs})
	case len(parts) == 8 && parts[0] == "v1" && parts[1] == "providers" && parts[5] == "download":
		p, ok := r.release(parts[2], parts[3], parts[4])
		if !ok || parts[6]+"_"+parts[7] != r.Platform {
			http.NotFound(w, req)
			return
		}
		base := r.URL + "/files/" + p.Namespace + "/"
		sumsName := fmt.Sprintf("terraform-provider-%s_%s_SHA256SUMS", p.Type, p.Version)
		writeJSON(w, map[string]any{
			"protocols": []string{"5.0", "6.0"}, "os": runtime.GOOS, "arch": runtime.GOARCH,
			"filename":              r.archiveName(p),
			"download_url":          base + r.archiveName(p),
			"shasums_url":           base + sumsName,
			"shasums_signature_url": base + sumsName + ".sig",
			"shasum":                r.ArchiveSHA256(p),
			"signing_keys": map[string]any{"gpg_public_keys": []map[string]string{{
				"key_id": strings.ToUpper(r.key.PrimaryKey.KeyIdString()), "ascii_armor": armored(r.key)}}},
		})
	case len(parts) == 3 && parts[0] == "files":
		r.serveFile(w, req, parts[1], parts[2], fault)
	case len(parts) == 5 && parts[0] == "mirror":
		r.serveMirror(w, req, parts[1:], fault)
	default:
		http.NotFound(w, req)
	}
}

func (r *Registry) serveFile(w http.ResponseWriter, req *http.Request, ns, name string, fault Fault) {
	if b, ok := r.archives[name]; ok {
		if fault == CorruptArchive {
			b = bytes.Clone(b)
			b[len(b)/2] ^= 0xff
		}
		w.Header().Set("Content-Type", "application/zip")
		_, _ = w.Write(b)
		return
	}
	sig := strings.HasSuffix(name, ".sig")
	rest, ok := strings.CutPrefix(strings.TrimSuffix(name, ".sig"), "terraform-provider-")
	if !ok {
		http.NotFound(w, req)
		return
	}
	rest, ok = strings.CutSuffix(rest, "_SHA256SUMS")
	typ, ver, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 {
		http.NotFound(w, req)
		return
	}
	sums := r.sums(ns, typ, ver)
	if !sig {
		_, _ = w.Write(sums)
		return
	}
	signer := r.key
	if fault == BadSignature {
		signer = r.other
	}
	var b bytes.Buffer
	if err := openpgp.DetachSign(&b, signer, bytes.NewReader(sums), nil); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write(b.Bytes())
}

// serveMirror answers <host>/<namespace>/<type>/index.json and .../<version>.json.
func (r *Registry) serveMirror(w http.ResponseWriter, req *http.Request, p []string, fault Fault) {
	ns, typ, leaf := p[1], p[2], p[3]
	rels := r.releases[ns+"/"+typ]
	if len(rels) == 0 {
		http.NotFound(w, req)
		return
	}
	if leaf == "index.json" {
		vs := map[string]any{}
		for _, rel := range rels {
			vs[rel.Version] = map[string]any{}
		}
		writeJSON(w, map[string]any{"versions": vs})
		return
	}
	ver, ok := strings.CutSuffix(leaf, ".json")
	rel, found := r.release(ns, typ, ver)
	if !ok || !found {
		http.NotFound(w, req)
		return
	}
	_ = fault // a corrupt archive is served by /files/ and no longer matches these hashes
	writeJSON(w, map[string]any{"archives": map[string]any{r.Platform: map[string]any{
		// Relative to this document's URL, as the protocol allows.
		"url":    "../../../../files/" + ns + "/" + r.archiveName(rel),
		"hashes": []string{"zh:" + r.ArchiveSHA256(rel)},
	}}})
}
