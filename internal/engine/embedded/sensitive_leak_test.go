package embedded

import (
	"strings"
	"testing"
)

// TestRunner_sensitiveDerivedValuesStayHidden: a value computed from a sensitive one (how
// synth hands the engines a Secret binding: render.SensitiveTemplate) never reaches an error
// message or an instance address, as in OpenTofu: a function that fails over it does not print
// it, count and for_each refuse it, and a map's sensitive element values stay sensitive in
// each.value. The control cases run the same expressions over a plain value and find it in the
// message, so the checks can fail.
func TestRunner_sensitiveDerivedValuesStayHidden(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-x"
	derived := []string{secret, "x-t3rc3s", "S3CR3T-X"}
	doc := func(locals, resource string) string {
		return `{"locals":` + locals + `,"resource":{"terraform_data":{"r":` + resource + `}}}`
	}
	// go-cty's conversion error names the map key, and an import's errors quote its id: both
	// must hide the detail.
	const pw = `{"pw":"${sensitive(\"` + secret + `\")}"}`
	module := `{"//":{"lava_modules":{"modules/m":{"variable":{"tags":{"type":"map(string)"}},"resource":{"terraform_data":{"r":{"input":"${var.tags}"}}}}}},` +
		`"locals":` + pw + `,"module":{"m":{"source":"./modules/m","tags":"${ {for c in [\"x\"] : upper(local.pw) => [c]} }"}}}`
	imported := `{"locals":` + pw + `,"import":[{"to":"terraform_data.r","id":"${upper(local.pw)}"}],"resource":{"terraform_data":{"r":{"input":"x"}}}}`
	for _, tc := range []struct {
		name, locals, resource, want string
		whole                        string // the whole document, when set
	}{
		{name: "conversion error", whole: module, want: "want map of string: (the detail is not shown: the expression uses a sensitive value)"},
		{name: "import id", whole: imported, want: "import terraform_data.r: id is sensitive"},
		{"conversion error", `{"pw":"${sensitive(\"` + secret + `\")}"}`, `{"input":"${tonumber(strrev(local.pw))}"}`, "Invalid function argument: (the detail is not shown: the expression uses a sensitive value)", ""},
		{"parse error", `{"pw":"${sensitive(\"` + secret + `\")}"}`, `{"input":"${cidrsubnet(upper(local.pw), 8, 1)}"}`, "Invalid function argument: (the detail is not shown: the expression uses a sensitive value)", ""},
		{"for_each over a set", `{"pw":"${sensitive(\"` + secret + `\")}"}`, `{"for_each":"${toset([upper(local.pw)])}","input":"${each.key}"}`, "cannot be used as for_each arguments", ""},
		{"for_each over a list", `{"pw":"${sensitive(\"` + secret + `\")}"}`, `{"for_each":["${upper(local.pw)}"],"input":"${each.key}"}`, "cannot be used as for_each arguments", ""},
		{"for_each over a map with sensitive keys", `{"pw":"${sensitive(\"` + secret + `\")}"}`, `{"for_each":"${zipmap([upper(local.pw)], [1])}","input":"${each.key}"}`, "cannot be used as for_each arguments", ""},
		{"count", `{"pw":"${sensitive(\"` + secret + `\")}"}`, `{"count":"${length(local.pw)}","input":"x"}`, "cannot be used as count arguments", ""},
		// hcl's own error, not a function's.
		{"duplicate object key", `{"pw":"${sensitive(\"` + secret + `\")}"}`, `{"input":"${ {for c in [\"a\", \"b\"] : upper(local.pw) => c} }"}`, "Duplicate object key: (the detail is not shown: the expression uses a sensitive value)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newMemHarness(t, t.TempDir())
			d := tc.whole
			if d == "" {
				d = doc(tc.locals, tc.resource)
			}
			_, err := h.apply(t, d, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
			for _, d := range derived {
				if strings.Contains(err.Error(), d) {
					t.Errorf("the error shows %q: %v", d, err)
				}
			}
			if h.state == nil {
				return
			}
			for _, a := range h.state.Resources {
				for _, in := range a.Instances {
					if in.IndexKey != nil {
						t.Errorf("an instance %s[%v] was applied", a.Name, in.IndexKey)
					}
				}
			}
		})
	}
	// Controls: the same expressions over the plain value show it, or apply with it as a key.
	h := newMemHarness(t, t.TempDir())
	if _, err := h.apply(t, doc(`{"pw":"`+secret+`"}`, `{"input":"${tonumber(strrev(local.pw))}"}`), nil); err == nil || !strings.Contains(err.Error(), "x-t3rc3s") {
		t.Errorf("control: err = %v, want go-cty's message with the reversed value", err)
	}
	if _, err := h.apply(t, doc(`{"pw":"`+secret+`"}`, `{"input":"${ {for c in [\"a\", \"b\"] : upper(local.pw) => c} }"}`), nil); err == nil || !strings.Contains(err.Error(), "S3CR3T-X") {
		t.Errorf("control: err = %v, want hcl's duplicate key message with the upper-cased value", err)
	}
	if _, err := h.apply(t, doc(`{"pw":"`+secret+`"}`, `{"for_each":"${toset([upper(local.pw)])}","input":"${each.key}"}`), nil); err != nil {
		t.Errorf("control: for_each over a plain value: %v", err)
	}
	// A map whose values (not keys) are sensitive is allowed; each.value stays sensitive.
	h = newMemHarness(t, t.TempDir())
	if _, err := h.apply(t, doc(`{"pw":"${sensitive(\"`+secret+`\")}"}`, `{"for_each":{"k":"${local.pw}"},"input":"${each.value}"}`), nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range h.state.Resources {
		for _, in := range r.Instances {
			if got := string(in.SensitiveAttributes); !strings.Contains(got, `"input"`) {
				t.Errorf("%s sensitive_attributes = %s, want input (each.value of a sensitive element)", r.Name, got)
			}
		}
	}
}
