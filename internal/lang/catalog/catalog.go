package catalog

import (
	"embed"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

//go:embed architectures/*.tlisp
var files embed.FS

// dir is the embedded directory holding NAME.tlisp files.
const dir = "architectures"

// Entry is one bundled architecture.
type Entry struct {
	// Name is the architecture's name: its file name without ".tlisp", equal to the name of
	// its deflava-architecture and deflava-interface forms.
	Name string
	// MinResources is the number of resources the architecture renders with its defaults and
	// only its required inputs bound (from [Registry]).
	MinResources int
	// Source is the .tlisp text (a fresh copy per call; UTF-8).
	Source []byte
	// Interface is the file's deflava-interface of the same name; nil only if the file has
	// none or it does not read (the package tests rule both out).
	Interface *arch.Interface
}

// File returns the file name that positions in a bundled architecture carry
// ("bundled/NAME.tlisp", the same name internal/lang/render uses).
func File(name string) string { return "bundled/" + name + ".tlisp" }

// Registry returns the bundled architectures' names mapped to their minimum resource counts
// (the table in README.md, with pleme-io-dns, which upstream's registry left out). The map is a
// fresh copy; a package test checks that its keys are exactly the embedded files.
func Registry() map[string]int {
	return map[string]int{
		"aws-vpc-network":                11,
		"cloudflare-dns-records":         5,
		"akeyless-secrets":               6,
		"cloudflare-r2-bucket":           4,
		"public-dns":                     6,
		"akeyless-platform":              8,
		"cloudflare-tunnel":              3,
		"cloudflare-zone":                2,
		"aws-eks-cluster":                4,
		"split-horizon-dns":              4,
		"dns-record-set":                 2,
		"cilium-irsa":                    3,
		"cluster-autoscaler-iam":         2,
		"backup-recovery":                3,
		"ami-production-iam":             3,
		"cloudflare-tunnel-ingress":      3,
		"cloudflare-headless-blog":       3,
		"akeyless-aws-integration":       3,
		"convergence-dashboard":          4,
		"drill-network":                  3,
		"cloudflare-zero-trust-access":   2,
		"akeyless-dev-cluster":           2,
		"ami-test-iam":                   2,
		"drill-iam-role":                 2,
		"continuous-monitoring":          3,
		"akeyless-target-attested-infra": 2,
		"cloudflare-domain":              2,
		"cloudflare-dns-security":        3,
		"aws-sg-ingress-rules":           2,
		"github-org-repos":               0,
		"akeyless-dev-packer":            2,
		"akeyless-dev-workspace":         2,
		"azure-aks-cluster":              1,
		"burst-forge-dashboard":          2,
		"dns-record-set-typed":           4,
		"backup-recovery-multi-region":   3,
		"cilium-irsa-variants":           3,
		"discord-server-baseline":        3,
		"pleme-io-server":                44,
		"pleme-io-dns":                   9,
	}
}

// Names returns the names of the embedded .tlisp files, sorted.
func Names() []string {
	des, err := files.ReadDir(dir)
	if err != nil { // the directory is embedded; it always reads
		return nil
	}
	names := make([]string, 0, len(des))
	for _, de := range des {
		if n, ok := strings.CutSuffix(de.Name(), ".tlisp"); ok && !de.IsDir() {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// List returns every bundled architecture, sorted by name. Each entry's interface is read from
// its file on every call (the files are small; nothing is cached).
func List() []Entry {
	names := Names()
	out := make([]Entry, 0, len(names))
	for _, n := range names {
		if e, ok := Get(n); ok {
			out = append(out, e)
		}
	}
	return out
}

// Get returns the bundled architecture named name; ok is false when there is none. Names are
// matched exactly (no path, no ".tlisp" suffix).
func Get(name string) (Entry, bool) {
	src, ok := source(name)
	if !ok {
		return Entry{}, false
	}
	e := Entry{Name: name, MinResources: Registry()[name], Source: src}
	e.Interface, _ = readInterface(name, src)
	return e, true
}

// Interface returns the deflava-interface named name from the bundled file of the same name.
// Errors: `unknown bundled architecture "NAME"` for a name not in the catalog; the reader's
// diagnostics (file:line:col: message) when the file's interfaces do not read; and
// `bundled architecture "NAME" has no deflava-interface NAME` when the form is missing.
func Interface(name string) (*arch.Interface, error) {
	src, ok := source(name)
	if !ok {
		return nil, &UnknownError{Name: name}
	}
	return readInterface(name, src)
}

// UnknownError reports a name that is not a bundled architecture.
type UnknownError struct{ Name string }

// Error returns `unknown bundled architecture "NAME"`.
func (e *UnknownError) Error() string {
	return fmt.Sprintf("unknown bundled architecture %q", e.Name)
}

// source returns the file text for name, rejecting anything that is not a plain file name.
func source(name string) ([]byte, bool) {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return nil, false
	}
	b, err := files.ReadFile(path.Join(dir, name+".tlisp"))
	if err != nil {
		return nil, false
	}
	return b, true
}

func readInterface(name string, src []byte) (*arch.Interface, error) {
	ifaces, diags := tlisp.ReadInterfaces(src, tlisp.Options{File: File(name)})
	if diags.HasErrors() {
		return nil, fmt.Errorf("read interface of bundled architecture %q: %w", name, diags.Err())
	}
	for _, i := range ifaces {
		if i.Name == name {
			return i, nil
		}
	}
	return nil, fmt.Errorf("bundled architecture %q has no deflava-interface %s", name, name)
}
