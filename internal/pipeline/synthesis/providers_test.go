package synthesis

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/render"
)

// TestProviders_pins: the requirements synth publishes (Providers) carry each provider's :version pin,
// once per local name (an alias shares the first form's), and the default source.
func TestProviders_pins(t *testing.T) {
	out := &render.Output{Architecture: &arch.Architecture{Providers: []arch.ProviderRef{
		{Name: "aws", Source: "hashicorp/aws", Version: "~> 6.0"},
		{Name: "aws", Source: "hashicorp/aws", Version: "~> 6.0", Alias: "secondary"},
		{Name: "local"},
	}}}
	want := []*lavav1.ProviderRequirement{
		{Name: "aws", Source: "hashicorp/aws", Version: "~> 6.0"},
		{Name: "local", Source: "hashicorp/local"},
	}
	if diff := cmp.Diff(want, Providers(out), protocmp.Transform()); diff != "" {
		t.Fatalf("providers (-want +got):\n%s", diff)
	}
}
