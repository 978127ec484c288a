package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/hashicorp/go-version"

	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/lang/policy"
)

// defaultHosts are the registry hosts searched, in order; the first is the default host.
func defaultHosts() []string { return []string{"registry.opentofu.org", "registry.terraform.io"} }

// ErrProviderNotFound reports a provider that is not in the mirror directory.
var ErrProviderNotFound = errors.New("provider not found in the mirror")

// ProviderAddr is a provider's registry address: host/namespace/type.
type ProviderAddr struct {
	Host, Namespace, Type string
}

// String is "registry.opentofu.org/hashicorp/local".
func (a ProviderAddr) String() string { return a.Host + "/" + a.Namespace + "/" + a.Type }

// StateString is the provider reference state v4 stores:
// provider["registry.opentofu.org/hashicorp/local"].
func (a ProviderAddr) StateString() string { return `provider["` + a.String() + `"]` }

// BuiltinAddr returns the address of Terraform's built-in provider (terraform_data).
func BuiltinAddr() ProviderAddr {
	return ProviderAddr{Host: "terraform.io", Namespace: "builtin", Type: "terraform"}
}

// ParseProviderSource parses "local", "hashicorp/local" or "registry.terraform.io/hashicorp/local"
// with the registry address grammar ([policy.ProviderAddress]): a missing namespace is
// "hashicorp" and a missing host is registry.opentofu.org. Anything else, a ".." or a path
// separator in any part included, is an error, so an address can never name a directory
// outside the mirror (docs/security.md, "Engines").
func ParseProviderSource(src string) (ProviderAddr, error) {
	host, ns, typ, err := policy.ProviderAddress(strings.TrimSpace(src))
	if err != nil {
		return ProviderAddr{}, err
	}
	return ProviderAddr{Host: host, Namespace: ns, Type: typ}, nil
}

// Mirror is a provider directory laid out like OpenTofu's filesystem mirror (unpacked layout):
// <dir>/<host>/<namespace>/<type>/<version>/<os>_<arch>/terraform-provider-<type>[_v<version>].
type Mirror struct {
	Dir string
}

// Find returns the executable and version of the provider: the newest version in the mirror
// that meets the version constraint (hashicorp/go-version syntax, as required_providers
// writes it: "~> 1.4", ">= 1.2, < 2.0", "1.4.0"; "" allows any). When addr's host has no
// match, the other well-known registry host is tried, since mirrors often hold both. A bad
// constraint is an error; a provider with no matching version wraps [ErrProviderNotFound].
func (m Mirror) Find(addr ProviderAddr, constraint string) (path, found string, err error) {
	if m.Dir == "" {
		return "", "", fmt.Errorf("%s: no provider directory configured: %w", addr, ErrProviderNotFound)
	}
	// An address built in code gets the same grammar check as a parsed one before it names a
	// directory.
	if _, err := ParseProviderSource(addr.String()); err != nil {
		return "", "", fmt.Errorf("%w: %w", err, ErrProviderNotFound)
	}
	return m.find(addr, constraint, addr.searchHosts())
}

// searchHosts are the hosts a mirror is searched on for the provider: its own, then the other
// well-known registry hosts.
func (a ProviderAddr) searchHosts() []string {
	hosts := []string{a.Host}
	for _, h := range defaultHosts() {
		if h != a.Host {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// Versions lists the versions of addr the mirror has for this platform, oldest first, on the
// first host that has any, in the order [Mirror.Find] searches them.
func (m Mirror) Versions(addr ProviderAddr) []string {
	if m.Dir == "" {
		return nil
	}
	if _, err := ParseProviderSource(addr.String()); err != nil {
		return nil
	}
	for _, h := range addr.searchHosts() {
		if vs := providers.MirrorVersions(m.Dir, h, addr.Namespace, addr.Type); len(vs) > 0 {
			return vs
		}
	}
	return nil
}

func (m Mirror) find(addr ProviderAddr, constraint string, hosts []string) (path, found string, err error) {
	want, err := providers.ParseConstraint(constraint)
	if err != nil {
		return "", "", fmt.Errorf("%s: version constraint %q: %w", addr, constraint, err)
	}
	platform := runtime.GOOS + "_" + runtime.GOARCH
	for _, h := range hosts {
		base := filepath.Join(m.Dir, h, addr.Namespace, addr.Type)
		entries, err := os.ReadDir(base)
		if err != nil {
			continue
		}
		var best *version.Version
		bestPath := ""
		for _, e := range entries {
			v, err := version.NewVersion(e.Name())
			if err != nil || !want.Check(v) {
				continue
			}
			exe := providers.FindExecutable(filepath.Join(base, e.Name(), platform), addr.Type)
			if exe == "" {
				continue
			}
			if best == nil || v.GreaterThan(best) {
				best, bestPath = v, exe
			}
		}
		if best != nil {
			return bestPath, best.Original(), nil
		}
	}
	v := ""
	if strings.TrimSpace(constraint) != "" {
		v = " version " + strings.TrimSpace(constraint)
	}
	return "", "", fmt.Errorf("%s%s for %s not in %s: %w", addr, v, platform, m.Dir, ErrProviderNotFound)
}
