package tofu

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/lava-operator/lava/internal/engine"
)

func ptr(s string) *string { return &s }

func TestFindings(t *testing.T) {
	plan := `{
	  "format_version": "1.2",
	  "resource_drift": [
	    {"address": "local_file.gone", "mode": "managed", "type": "local_file", "name": "gone",
	     "change": {"actions": ["delete"], "before": {"content": "old", "filename": "/x"}, "after": null}},
	    {"address": "openstack_identity_user_v3.u", "mode": "managed", "type": "openstack_identity_user_v3", "name": "u",
	     "change": {"actions": ["delete"], "before": {"name": "u", "extra": {}, "domain_id": "default", "id": "1"}, "after": null}}
	  ],
	  "resource_changes": [
	    {"address": "aws_vpc.main", "mode": "managed", "type": "aws_vpc", "name": "main",
	     "change": {"actions": ["update"],
	       "before": {"cidr_block": "10.0.0.0/16", "tags": {"Owner": "bob", "Env": "prod"}, "password": "old-secret", "arn": "a"},
	       "after":  {"cidr_block": "10.1.0.0/16", "tags": {"Owner": "alice", "Env": "prod"}, "password": "new-secret"},
	       "after_unknown": {"arn": true},
	       "before_sensitive": {"password": true}, "after_sensitive": {"password": true}}},
	    {"address": "local_file.gone", "mode": "managed", "type": "local_file", "name": "gone",
	     "change": {"actions": ["create"], "before": null, "after": {"content": "old", "filename": "/x"}, "after_unknown": {"id": true}}},
	    {"address": "openstack_identity_user_v3.u", "mode": "managed", "type": "openstack_identity_user_v3", "name": "u",
	     "change": {"actions": ["create"], "before": null, "after": {"name": "u", "extra": null}, "after_unknown": {"id": true, "domain_id": true}}},
	    {"address": "local_file.extra", "mode": "managed", "type": "local_file", "name": "extra",
	     "change": {"actions": ["delete"], "before": {"content": "c"}, "after": null}},
	    {"address": "testkit_file.r", "mode": "managed", "type": "testkit_file", "name": "r",
	     "change": {"actions": ["delete", "create"], "before": {"content": "a", "id": "x"}, "after": {"content": "b"}, "after_unknown": {"id": true}}},
	    {"address": "testkit_file.keyed", "mode": "managed", "type": "testkit_file", "name": "keyed",
	     "change": {"actions": ["update"],
	       "before": {"tags": {"HUNTER2-DERIVED": "changed"}}, "after": {"tags": {"HUNTER2-DERIVED": "v"}},
	       "before_sensitive": {"tags": true}, "after_sensitive": {"tags": true}}},
	    {"address": "terraform_data.same", "mode": "managed", "type": "terraform_data", "name": "same",
	     "change": {"actions": ["no-op"], "before": {"input": "a"}, "after": {"input": "a"}}},
	    {"address": "data.x.y", "mode": "data", "type": "x", "name": "y", "change": {"actions": ["read"]}}
	  ]
	}`
	var p tfjson.Plan
	if err := json.Unmarshal([]byte(plan), &p); err != nil {
		t.Fatal(err)
	}
	got := Findings(&p, engine.DefaultCosmeticPrefixes())
	rep := &engine.DriftReport{Findings: got}
	rep.Finish()
	want := []engine.Finding{
		{Address: "aws_vpc.main", Attribute: "cidr_block", Change: "update", Observed: ptr("10.0.0.0/16"), Declared: ptr("10.1.0.0/16"), Severity: "functional"},
		{Address: "aws_vpc.main", Attribute: "password", Change: "update", Observed: ptr(engine.Redacted), Declared: ptr(engine.Redacted), Severity: "functional"},
		{Address: "aws_vpc.main", Attribute: "tags.Owner", Change: "update", Observed: ptr("bob"), Declared: ptr("alice"), Severity: "cosmetic"},
		{Address: "local_file.extra", Attribute: "*", Change: "delete", Severity: "critical"},
		{Address: "local_file.gone", Attribute: "*", Change: "replace", Severity: "critical"},
		// Gone out of band, whatever the planned creation's values: one replacement of "*", not
		// the provider's "" and {} of the gone object against the plan's nulls.
		{Address: "openstack_identity_user_v3.u", Attribute: "*", Change: "replace", Severity: "critical"},
		// A sensitive map is one finding at its own path: its keys (here derived from a
		// Secret) name no path; not seeing inside it, the
		// finding is functional even under a cosmetic prefix.
		{Address: "testkit_file.keyed", Attribute: "tags", Change: "update", Observed: ptr(engine.Redacted), Declared: ptr(engine.Redacted), Severity: "functional"},
		{Address: "testkit_file.r", Attribute: "content", Change: "replace", Observed: ptr("a"), Declared: ptr("b"), Severity: "critical"},
	}
	if diff := cmp.Diff(want, rep.Findings); diff != "" {
		t.Fatalf("Findings (-want +got):\n%s", diff)
	}
	if rep.MaxSeverity != engine.SeverityCritical {
		t.Fatalf("max severity %q", rep.MaxSeverity)
	}
}

// TestSummariesOnly: of the CLI's human output with sensitive values in the configuration, a
// failed step's tail keeps each diagnostic's summary and position lines, never its detail,
// source line or values, nor a wrapped detail line that starts like a position.
func TestSummariesOnly(t *testing.T) {
	out := `
╷
│ Error: Duplicate object key
│
│   with terraform_data.d,
│   on main.tf.json line 1, in resource.terraform_data.d:
│    1: {"resource":{"terraform_data":{"d":{"input":"${ {for c in x : upper(local.pw) => c} }"}}}}
│     ├────────────────
│     │ local.pw has a sensitive value
│
│ Two different items produced the key "S3CR3T-X" in this 'for' expression.
│ on S3CR3T-X line 2 wrapped detail
╵
`
	got := summariesOnly(out)
	want := "Error: Duplicate object key\n" + hiddenDetail + "\n  with terraform_data.d,\n  on main.tf.json line 1, in resource.terraform_data.d:\n"
	if got != want {
		t.Errorf("summariesOnly =\n%s\nwant\n%s", got, want)
	}
}
