package planpolicy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/lang/planpolicy"
)

func TestCompile_refused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		rules []planpolicy.Rule
		want  string
	}{
		{"undeclared", []planpolicy.Rule{{Name: "r", Change: `chnge.type == "x"`, Verdict: planpolicy.Deny}},
			`planRules[0] (r): change: 1:1: undeclared reference to 'chnge'`},
		{"syntax, second line", []planpolicy.Rule{{Name: "r", Plan: "size(plan.changes) >\n  > 3", Verdict: planpolicy.Deny}},
			`planRules[0] (r): plan: 2:3: Syntax error`},
		{"not a bool", []planpolicy.Rule{{Name: "r", Change: `change.address`, Verdict: planpolicy.Deny}},
			`planRules[0] (r): change: the expression is a dyn, want a bool`},
		{"an int", []planpolicy.Rule{{Name: "r", Plan: `1 + 2`, Verdict: planpolicy.Deny}},
			`the expression is a int, want a bool`},
		{"both", []planpolicy.Rule{{Name: "r", Change: "true", Plan: "true", Verdict: planpolicy.Deny}},
			`set exactly one of change`},
		{"neither", []planpolicy.Rule{{Name: "r", Verdict: planpolicy.Deny}}, `set exactly one of change`},
		{"verdict", []planpolicy.Rule{{Name: "r", Change: "true", Verdict: "allow"}}, `verdict "allow": want requireApproval or deny`},
		{"name", []planpolicy.Rule{{Name: "a b", Change: "true", Verdict: planpolicy.Deny}}, `planRules[0]: name "a b"`},
		{"duplicate", []planpolicy.Rule{{Name: "r", Change: "true", Verdict: planpolicy.Deny}, {Name: "r", Plan: "true", Verdict: planpolicy.Deny}},
			`planRules[1] (r): a second rule of that name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := planpolicy.Compile(tt.rules)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// changes is a plan of four changes: a database replaced, a bucket updated, a file created, a
// no-op the rules never see.
func changes() planpolicy.Input {
	num := json.Number("3")
	return planpolicy.Input{Namespace: "team-a", Name: "app", Engine: "embedded", Add: 2, ChangeCount: 1, Destroy: 1, Values: true,
		Changes: []planpolicy.Change{
			{Address: "aws_db_instance.main", Type: "aws_db_instance", Mode: "managed", Actions: []string{"delete", "create"},
				Before: map[string]any{"engine": "postgres", "replicas": num}, After: map[string]any{"engine": "postgres", "replicas": json.Number("4")}},
			{Address: "aws_s3_bucket.logs", Type: "aws_s3_bucket", Mode: "managed", Actions: []string{"update"},
				Before: map[string]any{"versioning": true}, After: map[string]any{"versioning": false}},
			{Address: "local_file.a", Type: "local_file", Mode: "managed", Actions: []string{"create"}, After: map[string]any{"filename": "/x"}},
			{Address: "local_file.same", Type: "local_file", Mode: "managed", Actions: []string{"no-op"}},
		}}
}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		rules   []planpolicy.Rule
		in      planpolicy.Input
		verdict planpolicy.Verdict
		want    string
	}{
		{"no rules", nil, changes(), planpolicy.Allow, ""},
		{"the built-in rule", planpolicy.DefaultRules(), changes(), planpolicy.RequireApproval,
			"requireApproval: rule stateful-replace-or-delete (aws_db_instance.main): replacing or deleting a resource that holds data needs an approval of this plan's id"},
		{"deny beats requireApproval", []planpolicy.Rule{
			{Name: "big", Plan: "plan.summary.add + plan.summary.change + plan.summary.destroy > 3", Verdict: planpolicy.RequireApproval, Message: "a big plan"},
			{Name: "no-db", Change: `change.type == "aws_db_instance" && "delete" in change.actions`, Verdict: planpolicy.Deny},
		}, changes(), planpolicy.Deny,
			"requireApproval: rule big: a big plan; deny: rule no-db (aws_db_instance.main): plan rule no-db matched"},
		{"values", []planpolicy.Rule{
			{Name: "versioning-off", Change: `has(change.before.versioning) && change.before.versioning && !change.after.versioning`, Verdict: planpolicy.Deny},
			{Name: "scale-up", Change: `has(change.after.replicas) && change.after.replicas > change.before.replicas`, Verdict: planpolicy.RequireApproval},
		}, changes(), planpolicy.Deny,
			"deny: rule versioning-off (aws_s3_bucket.logs): plan rule versioning-off matched; requireApproval: rule scale-up (aws_db_instance.main): plan rule scale-up matched"},
		{"no-ops are not seen", []planpolicy.Rule{{Name: "any-file", Change: `change.type == "local_file"`, Verdict: planpolicy.RequireApproval}},
			changes(), planpolicy.RequireApproval, "requireApproval: rule any-file (local_file.a): plan rule any-file matched"},
		{"object", []planpolicy.Rule{{Name: "prod", Plan: `object.namespace.startsWith("prod-") && size(plan.changes) > 0`, Verdict: planpolicy.Deny}},
			changes(), planpolicy.Allow, ""},
		{"values not read: the rule cannot decide, so it matches", []planpolicy.Rule{{Name: "v", Change: `change.after.filename == "/y"`, Verdict: planpolicy.Deny}},
			func() planpolicy.Input { in := changes(); in.Values = false; return in }(), planpolicy.Deny,
			"deny: rule v (aws_db_instance.main, aws_s3_bucket.logs, local_file.a): plan rule v matched (the rule could not decide, and so counts as matching: aws_db_instance.main: no such key: after)"},
		// Attacks of the seventeenth trial: a deny rule the plan's author makes fail on
		// another change (a deleted one has no after; a sensitive value is removed from the
		// body) still denies, and still names the change it matched.
		{"a failing sibling does not downgrade a deny", []planpolicy.Rule{{Name: "no-forbidden", Verdict: planpolicy.Deny,
			Change: `change.type == "terraform_data" && change.after.input.startsWith("forbidden")`}},
			planpolicy.Input{Values: true, Changes: []planpolicy.Change{
				{Address: "terraform_data.bad", Type: "terraform_data", Mode: "managed", Actions: []string{"create"}, After: map[string]any{"input": "forbidden-x"}},
				{Address: "terraform_data.shield", Type: "terraform_data", Mode: "managed", Actions: []string{"delete"}, Before: map[string]any{"input": "ok"}},
			}}, planpolicy.Deny,
			"deny: rule no-forbidden (terraform_data.bad, terraform_data.shield): plan rule no-forbidden matched (the rule could not decide, and so counts as matching: terraform_data.shield: no such key: input)"},
		{"a sensitive value does not evade a deny", []planpolicy.Rule{{Name: "no-public", Verdict: planpolicy.Deny,
			Change: `has(change.after.input) && change.after.input.startsWith("public")`}},
			planpolicy.Input{Values: true, Changes: []planpolicy.Change{
				{Address: "terraform_data.hidden", Type: "terraform_data", Mode: "managed", Actions: []string{"create"}, After: map[string]any{"input": nil}},
			}}, planpolicy.Deny,
			"deny: rule no-public (terraform_data.hidden): plan rule no-public matched (the rule could not decide, and so counts as matching: terraform_data.hidden: no such overload)"},
		// Attacks of the eighteenth trial: a value known only after apply is left out of
		// `after`, and a sensitive one is null, so a rule guarded as advised (has(), != null)
		// or comparing with == passed over it, and the value it forbids was applied. As
		// Undecidable values they make such a rule undecided, and so matching.
		{"a value known only after apply does not evade a guarded deny", []planpolicy.Rule{{Name: "no-forbidden", Verdict: planpolicy.Deny,
			Change: `change.after != null && has(change.after.input) && change.after.input == "forbidden"`}},
			planpolicy.Input{Values: true, Changes: []planpolicy.Change{
				{Address: "terraform_data.late", Type: "terraform_data", Mode: "managed", Actions: []string{"create"},
					After: planpolicy.Overlay(map[string]any{"id": nil}, map[string]any{"input": true, "output": true}, planpolicy.WhyUnknown)},
			}}, planpolicy.Deny,
			"deny: rule no-forbidden (terraform_data.late): plan rule no-forbidden matched (the rule could not decide, and so counts as matching: terraform_data.late: the value is known only after apply)"},
		{"a sensitive value does not evade an == deny", []planpolicy.Rule{{Name: "no-forbidden", Verdict: planpolicy.Deny,
			Change: `change.after.input == "forbidden"`}},
			planpolicy.Input{Values: true, Changes: []planpolicy.Change{
				{Address: "terraform_data.hidden", Type: "terraform_data", Mode: "managed", Actions: []string{"create"},
					After: planpolicy.Overlay(map[string]any{"input": nil}, map[string]any{"input": true}, planpolicy.WhySensitive)},
			}}, planpolicy.Deny,
			"deny: rule no-forbidden (terraform_data.hidden): plan rule no-forbidden matched (the rule could not decide, and so counts as matching: terraform_data.hidden: the value is sensitive)"},
		{"an unknown value elsewhere decides nothing", []planpolicy.Rule{{Name: "no-forbidden", Verdict: planpolicy.Deny,
			Change: `has(change.after.input) && change.after.input == "forbidden"`}},
			planpolicy.Input{Values: true, Changes: []planpolicy.Change{
				{Address: "terraform_data.ok", Type: "terraform_data", Mode: "managed", Actions: []string{"create"},
					After: planpolicy.Overlay(map[string]any{"input": "fine"}, map[string]any{"output": true}, planpolicy.WhyUnknown)},
			}}, planpolicy.Allow, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			set, err := planpolicy.Compile(tt.rules)
			if err != nil {
				t.Fatal(err)
			}
			res, err := set.Evaluate(t.Context(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != tt.verdict || res.String() != tt.want {
				t.Errorf("verdict %s %q,\nwant %s %q", res.Verdict, res.String(), tt.verdict, tt.want)
			}
		})
	}
}

func TestEvaluate_addressesBounded(t *testing.T) {
	t.Parallel()
	in := planpolicy.Input{}
	for i := range 25 {
		in.Changes = append(in.Changes, planpolicy.Change{Address: fmt.Sprintf("aws_ebs_volume.v[%d]", i), Type: "aws_ebs_volume", Mode: "managed", Actions: []string{"delete"}})
	}
	res, err := planpolicy.Default().Evaluate(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Matches) != 1 || len(res.Matches[0].Addresses) != 10 || res.Matches[0].AddressesOmitted != 15 {
		t.Fatalf("matches %+v, want one naming 10 addresses and counting 15 more", res.Matches)
	}
	if !strings.Contains(res.String(), "aws_ebs_volume.v[9] and 15 more)") {
		t.Errorf("%q does not count the addresses it leaves out", res.String())
	}
}

// TestEvaluate_bounded: evaluation over values the plan's author controls is bounded in cost
// and in time, and a rule cut short counts as matching with its own verdict, never as allowed
// and never downgraded: a scan of 50 MiB of values stops at its cost limit; 60 maps of 200,000
// keys (cel-go's cost tracking is quadratic in time over them) are left out of what rules see,
// so a rule reading them cannot decide, while a later deny rule on types still denies; the
// plan's evaluation ends at EvalTimeout; a done context is an error, not a verdict.
func TestEvaluate_bounded(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	in := planpolicy.Input{Values: true}
	for i := range 50 {
		in.Changes = append(in.Changes, planpolicy.Change{Address: fmt.Sprintf("local_file.f[%d]", i), Type: "local_file", Mode: "managed",
			Actions: []string{"create"}, After: map[string]any{"content": big}})
	}
	set := planpolicy.MustCompile([]planpolicy.Rule{{Name: "scan", Verdict: planpolicy.Deny,
		Change: `change.after.content.split("").exists(c, c == "y")`}})
	res, err := set.Evaluate(t.Context(), in)
	if err != nil || res.Verdict != planpolicy.Deny || !strings.Contains(res.String(), "could not decide") {
		t.Errorf("verdict %s %q (%v), want deny: could not decide", res.Verdict, res.String(), err)
	}

	keys := map[string]any{}
	for i := range 200_000 {
		keys[fmt.Sprintf("k%d", i)] = "v"
	}
	wide := planpolicy.Input{Values: true}
	for i := range 60 {
		wide.Changes = append(wide.Changes, planpolicy.Change{Address: fmt.Sprintf("terraform_data.f%02d", i), Type: "terraform_data", Mode: "managed",
			Actions: []string{"create"}, After: map[string]any{"input": keys}})
	}
	wide.Changes = append(wide.Changes, planpolicy.Change{Address: "aws_db_instance.main", Type: "aws_db_instance", Mode: "managed", Actions: []string{"delete"}})
	two := planpolicy.MustCompile([]planpolicy.Rule{
		{Name: "public", Verdict: planpolicy.RequireApproval, Change: `has(change.after.input) && change.after.input.exists(k, k == "public")`},
		{Name: "no-db-delete", Verdict: planpolicy.Deny, Change: `change.type == "aws_db_instance" && "delete" in change.actions`},
	})
	start := time.Now()
	res, err = two.Evaluate(t.Context(), wide)
	took := time.Since(start)
	if err != nil || res.Verdict != planpolicy.Deny || !strings.Contains(res.String(), "deny: rule no-db-delete (aws_db_instance.main)") ||
		!strings.Contains(res.String(), "requireApproval: rule public (terraform_data.f00") {
		t.Errorf("verdict %s %.300q (%v), want deny by no-db-delete and the wide values undecided", res.Verdict, res.String(), err)
	}
	withinTimeout(t, took)

	// Under the node bound, but slow to scan: the plan's evaluation stops at EvalTimeout and
	// the rule, undecided, still denies.
	nine := map[string]any{}
	for i := range 9_000 {
		nine[fmt.Sprintf("k%d", i)] = "v"
	}
	slow := planpolicy.Input{Values: true}
	for i := range 200 {
		slow.Changes = append(slow.Changes, planpolicy.Change{Address: fmt.Sprintf("terraform_data.s%03d", i), Type: "terraform_data", Mode: "managed",
			Actions: []string{"create"}, After: map[string]any{"input": nine}})
	}
	scan := planpolicy.MustCompile([]planpolicy.Rule{{Name: "public", Verdict: planpolicy.Deny,
		Change: `has(change.after.input) && change.after.input.exists(k, k.startsWith("public"))`}})
	start = time.Now()
	res, err = scan.Evaluate(t.Context(), slow)
	took = time.Since(start)
	if err != nil || res.Verdict != planpolicy.Deny || !strings.Contains(res.String(), "ran out of their 5s") {
		t.Errorf("verdict %s %.300q (%v), want deny: ran out of their 5s", res.Verdict, res.String(), err)
	}
	withinTimeout(t, took)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := planpolicy.MustCompile([]planpolicy.Rule{{Name: "any", Change: "true", Verdict: planpolicy.Deny}}).Evaluate(ctx, changes()); err == nil {
		t.Error("a done context gave a verdict")
	}
}

func TestUsesValues(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]bool{
		`change.type == "x"`:                              false,
		`change.after.size > 3`:                           true,
		`has(change.before.x)`:                            true,
		`change["after"] != null`:                         true,
		`plan.changes.exists(c, c.before.x == 1)`:         true,
		`plan.changes.exists(c, c.type == "x")`:           false,
		`"delete" in change.actions && change.mode == ""`: false,
	} {
		set, err := planpolicy.Compile([]planpolicy.Rule{{Name: "r", Change: expr, Verdict: planpolicy.Deny}})
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if set.UsesValues() != want {
			t.Errorf("%s: UsesValues %v, want %v", expr, set.UsesValues(), want)
		}
	}
	if planpolicy.Default().UsesValues() {
		t.Error("the built-in rule reads values: every plan would need its review body")
	}
}

// withinTimeout fails t when an evaluation took longer than EvalTimeout and a margin.
func withinTimeout(t *testing.T, took time.Duration) {
	t.Helper()
	if took > planpolicy.EvalTimeout+5*time.Second {
		t.Errorf("evaluation took %s, over EvalTimeout %s", took, planpolicy.EvalTimeout)
	}
}
