package render

import (
	"encoding/json"
	"testing"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/catalog"
	"github.com/lava-operator/lava/internal/lang/tlisp"
	"github.com/lava-operator/lava/internal/platform/testutil/proctest"
)

// loop runs body b.N times and reports, beside ns/op, the process CPU time per operation
// (cpu-ns/op, GC included): on a shared, overloaded machine wall time mostly measures the
// wait for a core, CPU time the work.
func loop(b *testing.B, body func()) {
	b.Helper()
	b.ReportAllocs()
	start := proctest.SelfCPU(b)
	n := 0
	for b.Loop() {
		body()
		n++
	}
	b.ReportMetric(float64(proctest.SelfCPU(b)-start)/float64(n), "cpu-ns/op")
}

func vpcSource(b *testing.B) []byte {
	b.Helper()
	e, ok := catalog.Get("aws-vpc-network")
	if !ok {
		b.Fatal("catalog has no aws-vpc-network")
	}
	return e.Source
}

// BenchmarkRender reads, evaluates and emits the catalog's aws-vpc-network with its defaults:
// compact JSON (the form hashed and stored) and pretty JSON (what lava render prints).
func BenchmarkRender(b *testing.B) {
	src := vpcSource(b)
	opts := tlisp.Options{File: "bundled/aws-vpc-network.tlisp"}
	for _, form := range []struct {
		name string
		emit func(*arch.Architecture) ([]byte, error)
	}{
		{"aws-vpc-network", func(a *arch.Architecture) ([]byte, error) { return renderJSON(a, false, nil) }},
		{"aws-vpc-network-pretty", func(a *arch.Architecture) ([]byte, error) { return renderJSON(a, true, nil) }},
	} {
		b.Run(form.name, func(b *testing.B) {
			loop(b, func() {
				a, diags := tlisp.EvalArchitecture(src, tlisp.Bindings{}, opts)
				if a == nil {
					b.Fatal(diags)
				}
				if _, err := form.emit(a); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkMarshal only json.Marshals the same rendered Terraform JSON document, held as the
// generic value encoding/json decodes it into: the baseline BenchmarkRender is compared with.
func BenchmarkMarshal(b *testing.B) {
	a, diags := tlisp.EvalArchitecture(vpcSource(b), tlisp.Bindings{}, tlisp.Options{})
	if a == nil {
		b.Fatal(diags)
	}
	out, err := renderJSON(a, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		b.Fatal(err)
	}
	b.Run("aws-vpc-network", func(b *testing.B) {
		loop(b, func() {
			if _, err := json.Marshal(v); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkDigest computes the RenderRecord digests of the aws-vpc-network render: source,
// bindings (with one secret) and the JCS digest of the Terraform JSON.
func BenchmarkDigest(b *testing.B) {
	src := vpcSource(b)
	a, diags := tlisp.EvalArchitecture(src, tlisp.Bindings{}, tlisp.Options{})
	if a == nil {
		b.Fatal(diags)
	}
	out, err := renderJSON(a, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	bindings := tlisp.Bindings{
		Scalars: map[string]string{"name": "prod", "cidr": "10.0.0.0/16", "token": "s3cret"},
		Lists:   map[string][]string{"availability-zones": {"us-east-1a", "us-east-1b"}},
	}
	secret := map[string]bool{"token": true}
	key := make([]byte, BindingsKeySize)
	text := string(src)
	loop(b, func() {
		_ = SourceDigest(text)
		if _, err := BindingsDigest(bindings, secret, key); err != nil {
			b.Fatal(err)
		}
		if _, err := DigestJSON(out); err != nil {
			b.Fatal(err)
		}
	})
}
