package manifest

import (
	"errors"
	"os"
	"testing"
)

// FuzzParse feeds arbitrary files to the manifest decoder lava up and lava validate
// share (Parse, Decode): it never panics; every problem with a position has
// a 1-based line and column; every object it accepts has a namespace and a name.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"../../examples/cloud/prod-vpc.yaml", "../../examples/testkit.yaml",
		"../../cmd/lava/testdata/multi.yaml", "../../cmd/lava/testdata/not-yaml.yaml", "../../cmd/lava/testdata/bad-binding.yaml"} {
		data, err := os.ReadFile(seed)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: x}\nspec: {source: {inline: \"(\"}}\n---\n"))
	f.Add([]byte("{\"kind\": \"LavaArchitecture\", \"spec\": [1, 2]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := Parse("f.yaml", data)
		var pe *PosError
		if errors.As(err, &pe) && (pe.Line < 1 || pe.Col < 1) {
			t.Fatalf("problem at %d:%d: %s", pe.Line, pe.Col, pe.Msg)
		}
		for _, m := range ms {
			if m.Object == nil || m.Object.Name == "" || m.Object.Namespace == "" {
				t.Fatalf("accepted an object without namespace/name: %+v", m.Object)
			}
		}
	})
}
