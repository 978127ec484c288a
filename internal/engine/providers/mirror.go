package providers

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/hashicorp/go-version"
)

// MirrorVersions lists the versions of the provider host/namespace/typ of which the unpacked
// filesystem mirror dir (<dir>/<host>/<namespace>/<type>/<version>/<os>_<arch>/) holds an
// executable for this platform, oldest first; nil when it holds none.
func MirrorVersions(dir, host, namespace, typ string) []string {
	base := filepath.Join(dir, host, namespace, typ)
	entries, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	platform := runtime.GOOS + "_" + runtime.GOARCH
	var vs []*version.Version
	for _, e := range entries {
		v, err := version.NewVersion(e.Name())
		if err != nil || FindExecutable(filepath.Join(base, e.Name(), platform), typ) == "" {
			continue
		}
		vs = append(vs, v)
	}
	slices.SortFunc(vs, func(a, b *version.Version) int { return a.Compare(b) })
	var out []string
	for _, v := range vs {
		out = append(out, v.Original())
	}
	return out
}
