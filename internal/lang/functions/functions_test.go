package functions

import "testing"

// TestCheck: unknown names, wrong counts for fixed and variadic signatures, core:: once,
// provider-defined functions and expanded final arguments.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		args   int
		expand bool
		want   string
	}{
		{"abs", 1, false, ""},
		{"core::abs", 1, false, ""},
		{"nosuch", 1, false, "call to unknown function nosuch"},
		{"core::core::abs", 1, false, "call to unknown function core::core::abs"},
		{"Abs", 1, false, "call to unknown function Abs"},
		{"abs", 2, false, "wrong number of arguments to function abs: it takes 1, got 2"},
		{"cidrsubnet", 2, false, "wrong number of arguments to function cidrsubnet: it takes 3, got 2"},
		{"uuid", 0, false, ""},
		{"uuid", 1, false, "wrong number of arguments to function uuid: it takes 0, got 1"},
		// Variadic: the fixed parameters are required, any number may follow.
		{"concat", 0, false, ""},
		{"concat", 7, false, ""},
		{"cidrsubnets", 1, false, ""},
		{"cidrsubnets", 4, false, ""},
		{"cidrsubnets", 0, false, "wrong number of arguments to function cidrsubnets: it takes at least 1, got 0"},
		{"lookup", 2, false, ""},
		{"lookup", 3, false, ""},
		{"lookup", 1, false, "wrong number of arguments to function lookup: it takes at least 2, got 1"},
		{"format", 0, false, "wrong number of arguments to function format: it takes at least 1, got 0"},
		// An expanded last argument: its elements count only at evaluation.
		{"abs", 1, true, ""},
		{"min", 3, true, ""},
		{"abs", 3, true, "too many arguments to function abs: it takes 1, and 2 come before the expanded one"},
		// Provider-defined functions: the provider's schema has their signatures.
		{"provider::aws::arn_parse", 1, false, ""},
		{"provider::aws::east::arn_parse", 9, false, ""},
		{"provider::terraform::encode_tfvars", 1, false, ""},
	} {
		if got := Check(tt.name, tt.args, tt.expand); got != tt.want {
			t.Errorf("Check(%q, %d, %t) = %q, want %q", tt.name, tt.args, tt.expand, got, tt.want)
		}
	}
}

// TestBuiltin_isACopy: a caller cannot change the table.
func TestBuiltin_isACopy(t *testing.T) {
	t.Parallel()
	b := Builtin()
	delete(b, "abs")
	if _, ok := Lookup("abs"); !ok {
		t.Fatal("deleting from Builtin's map removed abs from the table")
	}
}
