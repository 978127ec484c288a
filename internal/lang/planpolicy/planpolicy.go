package planpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
)

// Verdict is what a plan may do: be applied, wait for an approval of its id, or never be
// applied.
type Verdict string

// The verdicts, from the least to the most severe.
const (
	Allow           Verdict = "allow"
	RequireApproval Verdict = "requireApproval"
	Deny            Verdict = "deny"
)

func (v Verdict) severity() int {
	switch v {
	case Deny:
		return 2
	case RequireApproval:
		return 1
	}
	return 0
}

// Rule is one rule of the policy document's planRules (docs/design/0037-plan-policies.md):
//
//   - name: no-database-delete
//     change: 'change.type == "aws_db_instance" && "delete" in change.actions'
//     verdict: deny
//     message: databases are never deleted by Lava
//   - name: large-plans
//     plan: 'plan.summary.add + plan.summary.change + plan.summary.destroy > 50'
//     verdict: requireApproval
//
// Exactly one of Change and Plan is set; the expression is a CEL bool, true when the rule
// matches.
type Rule struct {
	// Name names the rule in verdicts and errors: 1 to 63 letters, digits, '-' and '_'.
	Name string `json:"name"`
	// Change is evaluated once per resource change (no-op and read changes left out) with
	// `change`: address, type, mode ("managed" or "data"), actions (as `tofu show -json`
	// lists them: ["create"], ["update"], ["delete"], ["delete","create"]), before and after
	// (the resource's values, sensitive ones removed; only evaluated, and so read, when a
	// rule names them), and `object`.
	Change string `json:"change,omitempty"`
	// Plan is evaluated once with `plan`: changes (the list of `change` values), summary
	// (add, change, destroy), and `object`.
	Plan string `json:"plan,omitempty"`
	// Verdict is requireApproval or deny.
	Verdict Verdict `json:"verdict"`
	// Message is shown with the verdict (in the condition, the Failed event, `lava plan
	// show`); default "plan rule NAME matched".
	Message string `json:"message,omitempty"`
}

// Cost limits (cel-go's abstract cost units, roughly one per operation and per element a
// comprehension or string function visits).
const (
	// EvalCostLimit bounds one evaluation of one rule.
	EvalCostLimit = 1_000_000
	// PlanCostLimit bounds every evaluation of every rule on one plan.
	PlanCostLimit = 50_000_000
)

// maxNamed is how many addresses a match lists before it counts the rest.
const maxNamed = 10

// Set is a compiled list of rules. The zero Set and a nil *Set have no rules: every plan is
// allowed.
type Set struct {
	rules  []compiled
	values bool
}

type compiled struct {
	Rule
	prg cel.Program
}

var env = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("change", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("plan", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("object", cel.MapType(cel.StringType, cel.StringType)),
		ext.Strings(),
		ext.Sets(),
		ext.Lists(),
	)
})

// Compile compiles rules. Errors name the rule by index and name and give each CEL problem with
// its line and column within the expression ("planRules[0] (no-db): change: 1:8: undeclared
// reference to 'chnge'"); a rule with both or neither expression, an unknown verdict, a bad or
// duplicate name, or an expression that is not a bool is an error too.
func Compile(rules []Rule) (*Set, error) {
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("planRules: %w", err)
	}
	s := &Set{}
	seen := map[string]bool{}
	for i, r := range rules {
		where := fmt.Sprintf("planRules[%d] (%s)", i, r.Name)
		if !validName(r.Name) {
			return nil, fmt.Errorf("planRules[%d]: name %q: want 1 to 63 letters, digits, '-' or '_'", i, r.Name)
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("%s: a second rule of that name", where)
		}
		seen[r.Name] = true
		if r.Verdict != RequireApproval && r.Verdict != Deny {
			return nil, fmt.Errorf("%s: verdict %q: want requireApproval or deny", where, r.Verdict)
		}
		field, src := "change", r.Change
		switch {
		case (r.Change == "") == (r.Plan == ""):
			return nil, fmt.Errorf("%s: set exactly one of change (a CEL bool per resource change) and plan (a CEL bool over the whole plan)", where)
		case r.Plan != "":
			field, src = "plan", r.Plan
		}
		ast, iss := e.Compile(src)
		if iss.Err() != nil {
			return nil, fmt.Errorf("%s: %s: %s", where, field, issues(iss))
		}
		if !ast.OutputType().IsExactType(types.BoolType) {
			return nil, fmt.Errorf("%s: %s: the expression is a %s, want a bool (true when the rule matches)", where, field, ast.OutputType())
		}
		prg, err := e.Program(ast, cel.CostLimit(EvalCostLimit), cel.InterruptCheckFrequency(100))
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", where, field, err)
		}
		s.values = s.values || readsValues(ast.NativeRep())
		s.rules = append(s.rules, compiled{Rule: r, prg: prg})
	}
	return s, nil
}

// MustCompile is [Compile] for rules known to compile (the built-in defaults); it panics
// otherwise.
func MustCompile(rules []Rule) *Set {
	s, err := Compile(rules)
	if err != nil {
		panic(err)
	}
	return s
}

// issues formats CEL's problems as "LINE:COL: message", joined by "; ".
func issues(iss *cel.Issues) string {
	var out []string
	for _, e := range iss.Errors() {
		out = append(out, fmt.Sprintf("%d:%d: %s", e.Location.Line(), e.Location.Column()+1, e.Message))
	}
	return strings.Join(out, "; ")
}

func validName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '-' && r != '_' {
			return false
		}
	}
	return true
}

// readsValues reports whether an expression names a change's before or after: a field
// selection (change.after, c.before in a comprehension) or an index by that constant string.
func readsValues(a *celast.AST) bool {
	found := false
	celast.PostOrderVisit(a.Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.SelectKind:
			if f := e.AsSelect().FieldName(); f == "before" || f == "after" {
				found = true
			}
		case celast.LiteralKind:
			if s, ok := e.AsLiteral().(types.String); ok && (s == "before" || s == "after") {
				found = true
			}
		}
	}))
	return found
}

// Len is the number of rules.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// UsesValues reports whether a rule reads a change's before or after values: only then does
// the caller need the plan's values ([Change].Before and After).
func (s *Set) UsesValues() bool { return s != nil && s.values }

// Change is one resource change of a plan.
type Change struct {
	Address string
	Type    string
	// Mode is "managed" or "data".
	Mode string
	// Actions as `tofu show -json` lists them: ["create"], ["update"], ["delete"],
	// ["delete","create"] (a replace), ["read"], ["no-op"].
	Actions []string
	// Before and After are the values (JSON-decoded; json.Number allowed), sensitive ones
	// removed; nil when not read.
	Before, After any
}

// Input is what the rules of one plan see.
type Input struct {
	// Namespace, Name and Engine are the object's (`object`).
	Namespace, Name, Engine string
	// Changes are the plan's resource changes; no-op and read changes are left out of what
	// the rules see.
	Changes []Change
	// Add, Change and Destroy are the plan's summary.
	Add, ChangeCount, Destroy int
	// Values: Before and After of Changes were read (the rules may use them).
	Values bool
}

// Match is one rule that matched.
type Match struct {
	Rule    string  `json:"rule"`
	Verdict Verdict `json:"verdict"`
	Message string  `json:"message"`
	// Addresses are the changes a change rule matched, in plan order, at most 10;
	// AddressesOmitted counts the rest.
	Addresses        []string `json:"addresses,omitempty"`
	AddressesOmitted int      `json:"addressesOmitted,omitempty"`
}

// Result is a plan's verdict and the rules that made it.
type Result struct {
	Verdict Verdict `json:"verdict"`
	Matches []Match `json:"matches,omitempty"`
}

// String is the result in one line: "deny: rule no-db (aws_db_instance.main): databases are
// never deleted by Lava; requireApproval: rule large-plans: ...", "" for allow.
func (r Result) String() string {
	var parts []string
	for _, m := range r.Matches {
		s := string(m.Verdict) + ": rule " + m.Rule
		if len(m.Addresses) > 0 {
			s += " (" + strings.Join(m.Addresses, ", ")
			if m.AddressesOmitted > 0 {
				s += fmt.Sprintf(" and %d more", m.AddressesOmitted)
			}
			s += ")"
		}
		parts = append(parts, s+": "+m.Message)
	}
	return strings.Join(parts, "; ")
}

// Evaluate runs every rule on in and returns the verdict. A rule that fails to evaluate (a
// missing field, a type error, its cost limit or the plan's, ctx done) matches with
// requireApproval and says why; the remaining rules still run unless the plan's budget is
// spent.
func (s *Set) Evaluate(ctx context.Context, in Input) Result {
	res := Result{Verdict: Allow}
	if s.Len() == 0 {
		return res
	}
	object := map[string]string{"namespace": in.Namespace, "name": in.Name, "engine": in.Engine}
	var changes []any
	var addrs []string
	for _, c := range in.Changes {
		if slices.Equal(c.Actions, []string{"no-op"}) || slices.Equal(c.Actions, []string{"read"}) {
			continue
		}
		m := map[string]any{"address": c.Address, "type": c.Type, "mode": c.Mode, "actions": slices.Clone(c.Actions)}
		if in.Values {
			m["before"], m["after"] = plain(c.Before), plain(c.After)
		}
		changes = append(changes, m)
		addrs = append(addrs, c.Address)
	}
	plan := map[string]any{"changes": changes, "summary": map[string]any{"add": in.Add, "change": in.ChangeCount, "destroy": in.Destroy}}
	var spent uint64
	eval := func(r compiled, vars map[string]any) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if spent >= PlanCostLimit {
			return false, fmt.Errorf("the plan's rules used their budget of %d cost units", PlanCostLimit)
		}
		out, det, err := r.prg.ContextEval(ctx, vars)
		if det != nil && det.ActualCost() != nil {
			spent += *det.ActualCost()
		}
		if err != nil {
			return false, err
		}
		b, ok := out.(types.Bool)
		if !ok {
			return false, fmt.Errorf("the expression gave %s, want a bool", typeName(out))
		}
		return bool(b), nil
	}
	for _, r := range s.rules {
		m := Match{Rule: r.Name, Verdict: r.Verdict, Message: r.Message}
		if m.Message == "" {
			m.Message = "plan rule " + r.Name + " matched"
		}
		var matched bool
		var err error
		if r.Plan != "" {
			matched, err = eval(r, map[string]any{"plan": plan, "object": object, "change": map[string]any{}})
		} else {
			for i, c := range changes {
				var hit bool
				if hit, err = eval(r, map[string]any{"change": c, "plan": plan, "object": object}); err != nil {
					err = fmt.Errorf("%s: %w", addrs[i], err)
					break
				}
				if hit {
					matched = true
					if len(m.Addresses) < maxNamed {
						m.Addresses = append(m.Addresses, addrs[i])
					} else {
						m.AddressesOmitted++
					}
				}
			}
		}
		if err != nil {
			m.Verdict, matched = RequireApproval, true
			m.Message = "plan rule " + r.Name + " could not be evaluated, so the plan waits for an approval: " + err.Error()
			if ctx.Err() != nil {
				m.Message = "plan rule " + r.Name + " was not evaluated (" + ctx.Err().Error() + "), so the plan waits for an approval"
			}
		}
		if !matched {
			continue
		}
		res.Matches = append(res.Matches, m)
		if m.Verdict.severity() > res.Verdict.severity() {
			res.Verdict = m.Verdict
		}
	}
	return res
}

// plain converts a JSON-decoded value for CEL: json.Number to an int64 when integral (else a
// float64); maps and lists recursively.
func plain(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = plain(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	}
	return v
}

func typeName(v ref.Val) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().TypeName()
}
