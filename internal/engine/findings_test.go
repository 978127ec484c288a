package engine

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	tfjson "github.com/hashicorp/terraform-json"
)

func ptr(s string) *string { return &s }

func TestPlanFindings(t *testing.T) {
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
	    {"address": "kubernetes_config_map.c", "mode": "managed", "type": "kubernetes_config_map", "name": "c",
	     "change": {"actions": ["update"],
	       "before": {"metadata": [{"name": "c", "labels": {"app": "web", "tier": "x"}}], "data": {"k": "v"}},
	       "after":  {"metadata": [{"name": "c", "labels": {"app": "web"}}], "data": {"k": "w"}}}},
	    {"address": "terraform_data.same", "mode": "managed", "type": "terraform_data", "name": "same",
	     "change": {"actions": ["no-op"], "before": {"input": "a"}, "after": {"input": "a"}}},
	    {"address": "data.x.y", "mode": "data", "type": "x", "name": "y", "change": {"actions": ["read"]}}
	  ]
	}`
	var p tfjson.Plan
	if err := json.Unmarshal([]byte(plan), &p); err != nil {
		t.Fatal(err)
	}
	got := PlanFindings(&p, DefaultCosmeticPrefixes())
	rep := &DriftReport{Findings: got}
	rep.Finish()
	want := []Finding{
		{Address: "aws_vpc.main", Attribute: "cidr_block", Change: "update", Observed: ptr("10.0.0.0/16"), Declared: ptr("10.1.0.0/16"), Severity: "functional"},
		{Address: "aws_vpc.main", Attribute: "password", Change: "update", Observed: ptr(Redacted), Declared: ptr(Redacted), Severity: "functional"},
		{Address: "aws_vpc.main", Attribute: "tags.Owner", Change: "update", Observed: ptr("bob"), Declared: ptr("alice"), Severity: "cosmetic"},
		// Inside a nested block (a list of one object) the path goes through the index, so
		// the label under metadata.0.labels. is cosmetic; data is functional.
		{Address: "kubernetes_config_map.c", Attribute: "data.k", Change: "update", Observed: ptr("v"), Declared: ptr("w"), Severity: "functional"},
		{Address: "kubernetes_config_map.c", Attribute: "metadata.0.labels.tier", Change: "update", Observed: ptr("x"), Severity: "cosmetic"},
		{Address: "local_file.extra", Attribute: "*", Change: "delete", Severity: "critical"},
		{Address: "local_file.gone", Attribute: "*", Change: "replace", Severity: "critical"},
		// Gone out of band, whatever the planned creation's values: one replacement of "*", not
		// the provider's "" and {} of the gone object against the plan's nulls.
		{Address: "openstack_identity_user_v3.u", Attribute: "*", Change: "replace", Severity: "critical"},
		// A sensitive map is one finding at its own path: its keys (here derived from a
		// Secret) name no path; not seeing inside it, the
		// finding is functional even under a cosmetic prefix.
		{Address: "testkit_file.keyed", Attribute: "tags", Change: "update", Observed: ptr(Redacted), Declared: ptr(Redacted), Severity: "functional"},
		{Address: "testkit_file.r", Attribute: "content", Change: "replace", Observed: ptr("a"), Declared: ptr("b"), Severity: "critical"},
	}
	if diff := cmp.Diff(want, rep.Findings); diff != "" {
		t.Fatalf("Findings (-want +got):\n%s", diff)
	}
	if rep.MaxSeverity != SeverityCritical {
		t.Fatalf("max severity %q", rep.MaxSeverity)
	}
}
