package tofutest

import (
	"os"
	"path/filepath"
	"testing"
)

// Tools is the OpenTofu tool directory (hack/tools/build-tofu.sh OUTDIR).
type Tools struct {
	// Dir is the tool directory ($LAVA_TOFU_DIR).
	Dir string
	// Bin is the tofu binary (Dir/bin/tofu).
	Bin string
	// Mirror is the filesystem provider mirror (Dir/providers): hashicorp/local 1.4.0 and
	// example/testkit 0.1.0 under registry.opentofu.org and registry.terraform.io.
	Mirror string
	// CLIConfig is the CLI config file that installs providers only from Mirror (Dir/tofurc).
	CLIConfig string
}

// Tofu returns the tool directory named by $LAVA_TOFU_DIR. A missing or incomplete directory
// fails the test, naming `make tools-tofu`.
func Tofu(t testing.TB) Tools {
	t.Helper()
	dir := os.Getenv("LAVA_TOFU_DIR")
	if dir == "" {
		t.Fatal("LAVA_TOFU_DIR is not set: run `make tools-tofu` and the tests through make (or export LAVA_TOFU_DIR=~/.cache/lava/tools/tofu-v1.12.6)")
	}
	tt := Tools{
		Dir:       dir,
		Bin:       filepath.Join(dir, "bin", "tofu"),
		Mirror:    filepath.Join(dir, "providers"),
		CLIConfig: filepath.Join(dir, "tofurc"),
	}
	for _, p := range []string{tt.Bin, tt.Mirror, tt.CLIConfig} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("tofu tool directory %s is incomplete (%v): run `make tools-tofu`", dir, err)
		}
	}
	return tt
}

// Terraform returns the Terraform binary named by $LAVA_TERRAFORM_BIN. A missing binary fails
// the test, naming `make tools-terraform`.
func Terraform(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("LAVA_TERRAFORM_BIN")
	if bin == "" {
		t.Fatal("LAVA_TERRAFORM_BIN is not set: run `make tools-terraform` and the tests through make")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("terraform binary %s: %v: run `make tools-terraform`", bin, err)
	}
	return bin
}
