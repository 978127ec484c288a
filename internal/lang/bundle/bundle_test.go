package bundle

import "testing"

// TestResolve: a local source joins the calling module's directory and stays inside the
// configuration; a remote source, an escape and a dot directory are errors.
func TestResolve(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ caller, source, want string }{
		{"", "./modules/net", "modules/net"},
		{"modules/net", "./leaf", "modules/net/leaf"},
		{"modules/net", "../file", "modules/file"},
		{"modules/net/leaf", "../../file", "modules/file"},
	} {
		if got, err := Resolve(tt.caller, tt.source); err != nil || got != tt.want {
			t.Errorf("Resolve(%q, %q) = %q, %v; want %q", tt.caller, tt.source, got, err, tt.want)
		}
	}
	for _, tt := range []struct{ caller, source string }{
		{"", "../x"}, {"", "./"}, {"", "."}, {"modules/net", "../../../x"}, {"", "./.terraform/providers"},
		{"", "hashicorp/consul/aws"}, {"", "git::https://example.com/m.git"}, {"", "/etc"},
	} {
		if got, err := Resolve(tt.caller, tt.source); err == nil {
			t.Errorf("Resolve(%q, %q) = %q, want an error", tt.caller, tt.source, got)
		}
	}
}
