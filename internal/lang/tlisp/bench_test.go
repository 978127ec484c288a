package tlisp

import (
	"os"
	"testing"
)

// BenchmarkPhases splits the render benchmark of internal/lang/render: reading alone, and reading
// plus evaluating, of the catalog's aws-vpc-network with its defaults.
func BenchmarkPhases(b *testing.B) {
	src, err := os.ReadFile("../catalog/architectures/aws-vpc-network.tlisp")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, diags := Parse(src, Options{}); len(diags) != 0 {
				b.Fatal(diags)
			}
		}
	})
	b.Run("parse+eval", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if a, diags := EvalArchitecture(src, Bindings{}, Options{}); a == nil {
				b.Fatal(diags)
			}
		}
	})
}
