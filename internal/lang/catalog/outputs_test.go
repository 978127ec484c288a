package catalog_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/lang/catalog"
)

// TestOutputs_everyInterfaceOutputIsRendered: for every bundled architecture, rendered with
// only its required inputs, each output its deflava-interface declares is a Terraform output
// block of the rendered JSON (so another LavaArchitecture can bind it with bindingsFrom
// outputsRef), and no rendered output is one the interface does not declare.
func TestOutputs_everyInterfaceOutputIsRendered(t *testing.T) {
	for _, e := range catalog.List() {
		t.Run(e.Name, func(t *testing.T) {
			_, out, _ := renderArch(t, e.Name, minimalBag(t, e.Interface))
			doc := decode(t, out)
			var declared []string
			for _, o := range e.Interface.Outputs {
				declared = append(declared, o.Name)
			}
			for _, name := range declared {
				if _, ok := doc.Output[name]; !ok {
					t.Errorf("interface output %q is not rendered (rendered: %v)", name, keys(doc.Output))
				}
			}
			for name := range doc.Output {
				if !slices.Contains(declared, name) {
					t.Errorf("rendered output %q is not declared by the interface (declared: %s)", name, strings.Join(declared, ", "))
				}
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
