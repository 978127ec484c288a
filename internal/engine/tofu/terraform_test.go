//go:build terraform

package tofu_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/enginetest"
	"github.com/lava-operator/lava/internal/lang/functions"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// TestEngine_terraform runs the same engine with a real Terraform 1.8.5 binary
// ($LAVA_TERRAFORM_BIN, `make tools-terraform`) against the same provider mirror: create,
// update in place, destroy. It fails when the binary is missing.
func TestEngine_terraform(t *testing.T) {
	bin := tofutest.Terraform(t)
	h := newHarness(t, harnessOpts{bin: bin, name: "terraform"})
	dir := t.TempDir()
	js := `{"resource":{
	  "terraform_data":{"marker":{"input":"v1"}},
	  "local_file":{"readme":{"filename":"` + filepath.Join(dir, "readme.txt") + `","content":"hello\n"}},
	  "testkit_file":{"kit":{"filename":"` + filepath.Join(dir, "kit.txt") + `","content":"kit\n"}}}}`
	p := h.plan(js)
	if p.Engine != "terraform" || p.EngineVersion != "1.8.5" || p.Summary != (engine.Summary{Add: 3}) ||
		p.ProviderVersions["registry.terraform.io/hashicorp/local"] != "1.4.0" {
		t.Fatalf("terraform plan %+v", p)
	}
	res := h.apply(p)
	for _, f := range []string{"readme.txt", "kit.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("%s not created: %v", f, err)
		}
	}
	up := h.plan(strings.Replace(js, `"v1"`, `"v2"`, 1))
	if up.Summary != (engine.Summary{Change: 1}) {
		t.Fatalf("update plan %+v", up.Summary)
	}
	res2 := h.apply(up)
	if res2.StateSerial <= res.StateSerial || res2.StateLineage != res.StateLineage {
		t.Fatalf("serial %d -> %d", res.StateSerial, res2.StateSerial)
	}
	if _, err := h.eng.Destroy(t.Context(), engine.DestroyRequest{Target: h.target(js)}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "readme.txt")); !os.IsNotExist(err) {
		t.Fatalf("readme.txt survived destroy: %v", err)
	}
}

// TestEngine_terraform_providerUnavailable: the seed architecture under Terraform fails fast
// with ErrProviderUnavailable, through the mirror pre-check and through init alone.
// TestEngine_terraformBlockCases: the dialect's moved, removed, check and variable blocks
// applied by Terraform 1.8.5 as by OpenTofu (enginetest.BlockCases).
func TestEngine_terraformBlockCases(t *testing.T) {
	bin := tofutest.Terraform(t)
	enginetest.RunBlockCases(t, func(t *testing.T) enginetest.BlockEngine {
		h := newHarness(t, harnessOpts{bin: bin, name: "terraform"})
		return enginetest.BlockEngine{
			Plan: func(doc string) (*engine.PlanRecord, error) {
				return h.eng.Plan(t.Context(), engine.PlanRequest{Target: h.target(doc), BindingsDigest: "b0"})
			},
			Apply: func(p *engine.PlanRecord) (*engine.ApplyResult, error) {
				return h.eng.Apply(t.Context(), engine.ApplyRequest{Plan: p, Holder: "test-replica"})
			},
		}
	})
}

func TestEngine_terraform_providerUnavailable(t *testing.T) {
	bin := tofutest.Terraform(t)
	for _, noMirror := range []bool{false, true} {
		h := newHarness(t, harnessOpts{bin: bin, name: "terraform", noMirror: noMirror})
		_, err := h.eng.Plan(t.Context(), engine.PlanRequest{Target: h.target(`{"resource":{"aws_vpc":{"main":{"cidr_block":"10.42.0.0/16"}}}}`)})
		if !errors.Is(err, engine.ErrProviderUnavailable) || !strings.Contains(err.Error(), "hashicorp/aws") {
			t.Fatalf("terraform plan of aws_vpc (no mirror check: %v): %v, want ErrProviderUnavailable naming hashicorp/aws", noMirror, err)
		}
	}
}

// TestEngine_terraformApplyFailureMessage is TestEngine_applyFailureMessage with Terraform.
func TestEngine_terraformApplyFailureMessage(t *testing.T) {
	checkApplyFailureMessage(t, newHarness(t, harnessOpts{bin: tofutest.Terraform(t), name: "terraform"}))
}

// TestFunctions_terraformSignatures: every function the real Terraform binary knows (`terraform
// metadata functions -json`) is in the language layer's table, which synthesis checks calls
// against, with Terraform's signature, so no call Terraform accepts is refused at synthesis.
// (The table is OpenTofu's: it also has functions Terraform 1.8 lacks.)
func TestFunctions_terraformSignatures(t *testing.T) {
	bin := tofutest.Terraform(t)
	cmd := exec.CommandContext(t.Context(), bin, "metadata", "functions", "-json")
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("terraform metadata functions -json: %v", err)
	}
	var meta struct {
		Signatures map[string]struct {
			Params   []json.RawMessage `json:"parameters"`
			Variadic json.RawMessage   `json:"variadic_parameter"`
		} `json:"function_signatures"`
	}
	if err := json.Unmarshal(out, &meta); err != nil {
		t.Fatal(err)
	}
	if len(meta.Signatures) < 100 {
		t.Fatalf("terraform lists only %d functions", len(meta.Signatures))
	}
	for name, ts := range meta.Signatures {
		want := functions.Signature{Params: len(ts.Params), Variadic: ts.Variadic != nil}
		if sig, ok := functions.Lookup(name); !ok || sig != want {
			t.Errorf("terraform function %s takes %s argument(s); the declared table has %s (declared: %t)", name, want, sig, ok)
		}
	}
}
