package embedded

import (
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// TestValuesEqual: equal and wholly known is true; an unknown anywhere, a different value or
// a different type is false; numbers of equal value written differently are equal.
func TestValuesEqual(t *testing.T) {
	t.Parallel()
	obj := func(v cty.Value) cty.Value {
		return cty.ObjectVal(map[string]cty.Value{"a": v, "tags": cty.SetVal([]cty.Value{cty.StringVal("x")})})
	}
	for _, tc := range []struct {
		name string
		a, b cty.Value
		want bool
	}{
		{"identical", obj(cty.StringVal("v")), obj(cty.StringVal("v")), true},
		{"different", obj(cty.StringVal("v")), obj(cty.StringVal("w")), false},
		{"unknown on both sides", obj(cty.UnknownVal(cty.String)), obj(cty.UnknownVal(cty.String)), false},
		{"unknown on one side", obj(cty.StringVal("v")), obj(cty.UnknownVal(cty.String)), false},
		{"nulls", cty.NullVal(cty.String), cty.NullVal(cty.String), true},
		{"null and a value", cty.NullVal(cty.String), cty.StringVal(""), false},
		{"same number written differently", cty.MustParseNumberVal("1.0"), cty.NumberIntVal(1), true},
		{"different types", cty.StringVal("1"), cty.NumberIntVal(1), false},
	} {
		if got := valuesEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: valuesEqual(%#v, %#v) = %v, want %v", tc.name, tc.a, tc.b, got, tc.want)
		}
	}
}

// TestSameValue: identical values are the same, marks and types included; cty.NilVal only as
// itself.
func TestSameValue(t *testing.T) {
	t.Parallel()
	v := cty.ObjectVal(map[string]cty.Value{"a": cty.StringVal("x")})
	for _, tc := range []struct {
		name string
		a, b cty.Value
		want bool
	}{
		{"identical", v, cty.ObjectVal(map[string]cty.Value{"a": cty.StringVal("x")}), true},
		{"different", v, cty.ObjectVal(map[string]cty.Value{"a": cty.StringVal("y")}), false},
		{"marked", v, v.Mark("sensitive"), false},
		{"null of another type", cty.NullVal(cty.String), cty.NullVal(cty.Number), false},
		{"nil and nil", cty.NilVal, cty.NilVal, true},
		{"nil and a null", cty.NilVal, cty.NullVal(cty.String), false},
	} {
		if got := sameValue(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: sameValue = %v, want %v", tc.name, got, tc.want)
		}
	}
}
