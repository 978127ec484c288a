package tofutest

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestkitVersion is the version of the test provider example/testkit that
// test/provider/testkit/build.sh builds (`make tools-testkit`).
const TestkitVersion = "0.4.0"

// EnvTestkitMirror names the filesystem mirror holding example/testkit [TestkitVersion]
// (test/provider/testkit/build.sh OUTDIR).
const EnvTestkitMirror = "LAVA_TESTKIT_MIRROR"

// TestkitMirror returns one provider mirror holding the tools' providers (hashicorp/local)
// and example/testkit [TestkitVersion] from $LAVA_TESTKIT_MIRROR, leaving out the tools'
// testkit 0.1.0 so the extended one is the only testkit. A missing mirror fails the test,
// naming the make target.
func TestkitMirror(t testing.TB, tools Tools) string {
	t.Helper()
	dir := os.Getenv(EnvTestkitMirror)
	bin := filepath.Join(dir, "registry.opentofu.org/example/testkit", TestkitVersion, "linux_amd64",
		"terraform-provider-testkit_v"+TestkitVersion)
	if _, err := os.Stat(bin); dir == "" || err != nil {
		t.Fatalf("$%s (%q) does not hold example/testkit %s: run `make tools-testkit` (test/provider/testkit/build.sh OUTDIR) and export %s=OUTDIR",
			EnvTestkitMirror, dir, TestkitVersion, EnvTestkitMirror)
	}
	return MergeMirrors(t, tools.Mirror, dir)
}

// MergeMirrors links every provider binary of the mirrors into one new mirror directory
// (later mirrors win), leaving out any example/testkit other than [TestkitVersion].
func MergeMirrors(t testing.TB, mirrors ...string) string {
	t.Helper()
	return mergeMirrors(t, false, mirrors)
}

// MergeAllMirrors is [MergeMirrors] keeping every version of every provider: with the tools'
// mirror and $LAVA_TESTKIT_MIRROR, example/testkit 0.1.0 and [TestkitVersion] side by side.
func MergeAllMirrors(t testing.TB, mirrors ...string) string {
	t.Helper()
	return mergeMirrors(t, true, mirrors)
}

func mergeMirrors(t testing.TB, all bool, mirrors []string) string {
	t.Helper()
	out := t.TempDir()
	for _, m := range mirrors {
		err := filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(m, p)
			if !all && strings.Contains(rel, "example/testkit/") && !strings.Contains(rel, "example/testkit/"+TestkitVersion+"/") {
				return nil
			}
			dst := filepath.Join(out, rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			_ = os.Remove(dst)
			return os.Symlink(p, dst)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
