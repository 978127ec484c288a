package embedded

import (
	"errors"
	"strings"
	"testing"
)

// TestRunner_forcedCreateBeforeDestroy: a resource that a create_before_destroy resource
// depends on (directly, or through a local and another resource) is replaced create-first
// too, as tofu forces it; one no such resource depends on is not (the corpus case
// testdata/corpus/lifecycle_dependencies.json).
func TestRunner_forcedCreateBeforeDestroy(t *testing.T) {
	t.Parallel()
	doc := func(trig string) string {
		return `{"locals":{"mid":"${terraform_data.mid.id}"},
		  "resource":{"terraform_data":{
		    "root":{"triggers_replace":"` + trig + `"},
		    "mid":{"triggers_replace":"${terraform_data.root.id}"},
		    "top":{"triggers_replace":"${local.mid}","lifecycle":{"create_before_destroy":true}},
		    "alone":{"triggers_replace":"` + trig + `"}}}}`
	}
	h := newMemHarness(t, t.TempDir())
	if _, err := h.apply(t, doc("1"), nil); err != nil {
		t.Fatal(err)
	}
	p, err := h.apply(t, doc("2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"terraform_data.root": true, "terraform_data.mid": true, "terraform_data.top": true, "terraform_data.alone": false}
	for _, c := range p.Changes {
		if c.Action != Replace {
			t.Errorf("%s: %s, want replace", c.Addr, c.Action)
		}
		if c.CreateBeforeDestroy != want[c.Addr] {
			t.Errorf("%s: create_before_destroy %v, want %v", c.Addr, c.CreateBeforeDestroy, want[c.Addr])
		}
	}
	for _, r := range h.state.Resources {
		if len(r.Instances) != 1 || r.Instances[0].Deposed != "" {
			t.Errorf("%s.%s: %d instances after the replacement (deposed %q)", r.Type, r.Name, len(r.Instances), r.Instances[0].Deposed)
		}
	}
}

// TestRunner_referencedSensitiveAttributes: a resource attribute made sensitive (here by a
// sensitive variable) stays sensitive through a reference: the referring resource records it
// in sensitive_attributes and issensitive() sees it, as in tofu. An output showing it
// without sensitive = true is hidden (recorded sensitive) rather than refused, while one
// showing the variable itself is still refused (the corpus case
// testdata/corpus/sensitive_values.json).
func TestRunner_referencedSensitiveAttributes(t *testing.T) {
	t.Parallel()
	base := `"variable":{"token":{"type":"string","default":"s3cr3t-x","sensitive":true}},
	  "resource":{"terraform_data":{"src":{"input":"${var.token}"},
	    "dst":{"input":{"copy":"${upper(terraform_data.src.input)}","plain":"p","is":"${issensitive(terraform_data.src.input)}"}}}}`
	h := newMemHarness(t, t.TempDir())
	if _, err := h.apply(t, `{`+base+`,"output":{"shown":{"value":"${terraform_data.dst.input.copy}"}}}`, nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range h.state.Resources {
		if r.Name != "dst" {
			continue
		}
		if got := string(r.Instances[0].SensitiveAttributes); !strings.Contains(got, `"copy"`) || strings.Contains(got, `"plain"`) {
			t.Errorf("dst sensitive_attributes = %s, want input.copy only", got)
		}
	}
	if got := h.attr(t, "terraform_data.dst", "input"); !strings.Contains(got, `"is":true`) {
		t.Errorf("issensitive(terraform_data.src.input) is not true: %s", got)
	}
	if o := h.state.Outputs["shown"]; !o.Sensitive {
		t.Errorf("output shown = %+v, want sensitive (hidden)", o)
	}
	_, err := h.apply(t, `{`+base+`,"output":{"raw":{"value":"${var.token}"}}}`, nil)
	if err == nil || !strings.Contains(err.Error(), "set sensitive = true") {
		t.Errorf("an output showing the sensitive variable: err = %v, want refused", err)
	}
	var ce *CheckFailedError
	if errors.As(err, &ce) {
		t.Errorf("refusal is a check failure: %v", err)
	}
}
