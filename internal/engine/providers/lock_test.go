package providers_test

import (
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine/providers"
)

func TestLock_roundTrip(t *testing.T) {
	in := providers.Lock{
		"registry.opentofu.org/hashicorp/local": {Version: "1.4.0", Constraints: "~> 1.4", Hashes: []string{"zh:abc", "h1:xyz="}},
		"registry.opentofu.org/example/testkit": {Version: "0.1.0", Hashes: []string{"h1:k="}},
	}
	text := in.Write()
	out, err := providers.ParseLock(text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if len(out) != 2 || out["registry.opentofu.org/hashicorp/local"].Version != "1.4.0" || len(out["registry.opentofu.org/hashicorp/local"].Hashes) != 2 {
		t.Errorf("round trip: %+v\n%s", out, text)
	}
	if c := out["registry.opentofu.org/hashicorp/local"].Constraints; c != "~> 1.4" {
		t.Errorf("constraints %q after the round trip, want ~> 1.4", c)
	}
	// The format `tofu providers lock` writes.
	tofu := []byte(`# This file is maintained automatically by "tofu init".
provider "registry.opentofu.org/hashicorp/local" {
  version     = "1.4.0"
  constraints = "1.4.0"
  hashes = [
    "h1:aaa=",
    "zh:bbb",
  ]
}
`)
	got, err := providers.ParseLock(tofu)
	if err != nil || got["registry.opentofu.org/hashicorp/local"].Hashes[1] != "zh:bbb" {
		t.Errorf("tofu's lock: %+v, %v", got, err)
	}
	if _, err := providers.ParseLock([]byte("provider \"x\" {\n  hashes = 3\n}\n")); err == nil || !strings.Contains(err.Error(), ":2,") {
		t.Errorf("bad lock error %v, want its line:col", err)
	}
}
