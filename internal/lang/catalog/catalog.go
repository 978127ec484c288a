package catalog

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/bundle"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// files holds architectures/NAME.tlisp and, beside an architecture that calls modules, its
// module directories architectures/NAME/DIR/main.tf.json (ModuleBundle).
//
//go:embed architectures
var files embed.FS

// archDir is the embedded directory holding NAME.tlisp files.
const archDir = "architectures"

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
		"cloudflare-zone":                6,
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
		"modules-demo":                   1,
	}
}

// Names returns the names of the embedded .tlisp files, sorted.
func Names() []string {
	des, err := files.ReadDir(archDir)
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
	b, err := files.ReadFile(path.Join(archDir, name+".tlisp"))
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

// ModuleFile is the file name of a bundled module's Terraform JSON in its directory.
const ModuleFile = "main.tf.json"

// ModuleDirs returns the module directories shipped with the bundled architecture name
// (each directory under architectures/NAME that holds a main.tf.json, relative to it), sorted;
// nil when it ships none.
func ModuleDirs(name string) []string {
	if _, ok := source(name); !ok {
		return nil
	}
	var dirs []string
	root := path.Join(archDir, name)
	_ = fs.WalkDir(files, root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == ModuleFile {
			dirs = append(dirs, strings.TrimPrefix(path.Dir(p), root+"/"))
		}
		return nil
	})
	slices.Sort(dirs)
	return dirs
}

// ModuleBundle returns the module directories of the bundled architecture name that dirs
// name, and every directory their local module sources name in turn (transitively): each
// directory mapped to its main.tf.json, read from architectures/NAME/DIR/main.tf.json. A
// directory is relative to the architecture's configuration root ("modules/net", what the
// source "./modules/net" names) and must pass bundle.CheckDir; a nested local source resolves
// against the calling module's directory (bundle.Resolve). A remote source is left to the
// tenant policy. Errors name the directory and, for a nested call, the module that calls it.
func ModuleBundle(name string, dirs []string) (map[string][]byte, error) {
	if _, ok := source(name); !ok {
		return nil, &UnknownError{Name: name}
	}
	out := map[string][]byte{}
	var add func(dir, from string) error
	add = func(dir, from string) error {
		if _, ok := out[dir]; ok {
			return nil
		}
		where := ""
		if from != "" {
			where = fmt.Sprintf(" (called from %s)", from)
		}
		if err := bundle.CheckDir(dir); err != nil {
			return fmt.Errorf("%w%s", err, where)
		}
		body, err := files.ReadFile(path.Join(archDir, name, dir, ModuleFile))
		if err != nil {
			return fmt.Errorf("no module directory %s is bundled with architecture %s (want architectures/%s/%s/%s in the catalog)%s",
				dir, name, name, dir, ModuleFile, where)
		}
		if !json.Valid(body) || len(body) == 0 || body[0] != '{' {
			return fmt.Errorf("bundled module %s of architecture %s: %s is not a JSON object", dir, name, ModuleFile)
		}
		out[dir] = body
		calls, err := bundle.Calls(body)
		if err != nil {
			return fmt.Errorf("bundled module %s of architecture %s: %w", dir, name, err)
		}
		for _, call := range slices.Sorted(maps.Keys(calls)) {
			src := calls[call]
			if !bundle.IsLocal(src) {
				continue
			}
			child, err := bundle.Resolve(dir, src)
			if err != nil {
				return fmt.Errorf("bundled module %s, module %s: %w", dir, call, err)
			}
			if err := add(child, dir+" module "+call); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range dirs {
		if err := add(d, ""); err != nil {
			return nil, err
		}
	}
	return out, nil
}
