package runner

import (
	"strings"
	"testing"
)

// TestMissingAt: what lava up --provider-runner says at start on kernels of each Landlock ABI:
// everything on none, network rules missing before v4, nothing from v6.
func TestMissingAt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		abi  int
		want []string
	}{
		{0, []string{"no Landlock"}},
		{1, []string{"before ABI v3", "before ABI v4", "before ABI v6"}},
		{3, []string{"before ABI v4", "before ABI v6"}},
		{4, []string{"before ABI v6"}},
		{6, nil},
		{7, nil},
	}
	for _, tt := range tests {
		got := missingAt(tt.abi)
		if len(got) != len(tt.want) {
			t.Errorf("ABI v%d: %q, want %d sentences", tt.abi, got, len(tt.want))
			continue
		}
		for i, w := range tt.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("ABI v%d: %q lacks %q", tt.abi, got[i], w)
			}
		}
	}
}
