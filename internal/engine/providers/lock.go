package providers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	"golang.org/x/mod/sumdb/dirhash"
)

// LockFile is the dependency lock's file name in a working directory.
const LockFile = ".terraform.lock.hcl"

// LockEntry is one provider of a dependency lock: the version selected, its version
// constraints as written when it was selected (may be empty) and its hashes ("h1:..." over the
// unpacked package directory, "zh:..." over a release zip).
type LockEntry struct {
	Version     string
	Constraints string
	Hashes      []string
}

// Lock is a dependency lock: provider address ("registry.opentofu.org/hashicorp/local") to
// entry.
type Lock map[string]LockEntry

// Clone returns a copy of l that shares nothing with it.
func (l Lock) Clone() Lock {
	if l == nil {
		return nil
	}
	out := make(Lock, len(l))
	for k, e := range l {
		e.Hashes = slices.Clone(e.Hashes)
		out[k] = e
	}
	return out
}

// ParseLock reads a dependency lock in the .terraform.lock.hcl format that `tofu init` and
// `tofu providers lock` write: provider "ADDRESS" { version = "V" constraints = "C"
// hashes = ["h1:...", "zh:..."] }. Other blocks and attributes are ignored. The error has the
// file's line:col.
func ParseLock(src []byte) (Lock, error) {
	f, diags := hclsyntax.ParseConfig(src, LockFile, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("dependency lock: %s", diags.Error())
	}
	out := Lock{}
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type != "provider" || len(b.Labels) != 1 {
			continue
		}
		var e LockEntry
		for name, dst := range map[string]*string{"version": &e.Version, "constraints": &e.Constraints} {
			a, ok := b.Body.Attributes[name]
			if !ok {
				continue
			}
			v, d := a.Expr.Value(nil)
			if d.HasErrors() || v.Type() != cty.String || v.IsNull() {
				return nil, fmt.Errorf("dependency lock: %s: %s is not a string", a.SrcRange, name)
			}
			*dst = v.AsString()
		}
		if a, ok := b.Body.Attributes["hashes"]; ok {
			v, d := a.Expr.Value(nil)
			if d.HasErrors() || !(v.Type().IsListType() || v.Type().IsTupleType()) {
				return nil, fmt.Errorf("dependency lock: %s: hashes is not a list of strings", a.SrcRange)
			}
			for it := v.ElementIterator(); it.Next(); {
				_, h := it.Element()
				if h.Type() != cty.String || h.IsNull() {
					return nil, fmt.Errorf("dependency lock: %s: hashes is not a list of strings", a.SrcRange)
				}
				e.Hashes = append(e.Hashes, h.AsString())
			}
		}
		out[b.Labels[0]] = e
	}
	return out, nil
}

// Write renders the lock in the .terraform.lock.hcl format (providers sorted by address,
// hashes sorted and de-duplicated), which OpenTofu and Terraform read.
func (l Lock) Write() []byte {
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	addrs := make([]string, 0, len(l))
	for a := range l {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for i, a := range addrs {
		if i > 0 {
			body.AppendNewline()
		}
		e := l[a]
		b := body.AppendNewBlock("provider", []string{a}).Body()
		b.SetAttributeValue("version", cty.StringVal(e.Version))
		if e.Constraints != "" {
			b.SetAttributeValue("constraints", cty.StringVal(e.Constraints))
		}
		hs := slices.Compact(slices.Sorted(slices.Values(e.Hashes)))
		vals := make([]cty.Value, len(hs))
		for j, h := range hs {
			vals[j] = cty.StringVal(h)
		}
		if len(vals) == 0 {
			b.SetAttributeValue("hashes", cty.ListValEmpty(cty.String))
		} else {
			b.SetAttributeValue("hashes", cty.ListVal(vals))
		}
	}
	return f.Bytes()
}

// Versions returns each provider's locked version.
func (l Lock) Versions() map[string]string {
	out := make(map[string]string, len(l))
	for a, e := range l {
		out[a] = e.Version
	}
	return out
}

// PackageHash is the h1: hash of an unpacked provider package directory, the hash the
// dependency lock records: golang.org/x/mod's dirhash Hash1 (SHA-256 over a sorted manifest of
// the files' SHA-256), as OpenTofu and Terraform compute it. A dir that is a symbolic link
// (a package directory in a plugin cache filled from a local mirror) is hashed where it points:
// the files that run. Errors: dir does not resolve, or a file cannot be read.
func PackageHash(dir string) (string, error) {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("hash provider package %s: %w", dir, err)
	}
	h, err := dirhash.HashDir(resolved, "", dirhash.Hash1)
	if err != nil {
		return "", fmt.Errorf("hash provider package %s: %w", dir, err)
	}
	return h, nil
}

// ZipHash is the zh: hash of a provider release archive: "zh:" and the hex SHA-256 of the zip
// file, the form SHA256SUMS lists.
func ZipHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash provider archive %s: %w", path, err)
	}
	return "zh:" + hex.EncodeToString(h.Sum(nil)), nil
}
