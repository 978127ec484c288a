package planpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

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

// EvalTimeout bounds the evaluation of every rule on one plan, in wall time: cel-go's cost
// tracking is not linear in time over large collections, so the cost limits alone do not
// bound it.
const EvalTimeout = 5 * time.Second

// MaxValueNodes bounds the values (objects, lists, scalars) of one change's before and after
// together that rules see; a larger change is judged without them.
const MaxValueNodes = 10_000

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
	parts := make([]string, len(r.Matches))
	for i, m := range r.Matches {
		parts[i] = m.String()
	}
	return strings.Join(parts, "; ")
}

// String is one match in one line: "deny: rule no-db (aws_db_instance.main): MESSAGE".
func (m Match) String() string {
	s := string(m.Verdict) + ": rule " + m.Rule
	if len(m.Addresses) > 0 {
		s += " (" + strings.Join(m.Addresses, ", ")
		if m.AddressesOmitted > 0 {
			s += fmt.Sprintf(" and %d more", m.AddressesOmitted)
		}
		s += ")"
	}
	return s + ": " + m.Message
}

// Evaluate runs every rule on in and returns the verdict. A rule that cannot decide on a
// change (a missing field, a value it cannot compare, such as a sensitive one removed from the
// body, a value over [MaxValueNodes], its cost limit or the plan's, the plan's [EvalTimeout])
// counts as matching it, with the rule's own verdict, and says why: a deny rule the plan's
// author can make fail still denies (fail closed), and every change is judged whatever an
// earlier one did. Errors: only ctx's (the operation ended; nothing was decided).
func (s *Set) Evaluate(ctx context.Context, in Input) (Result, error) {
	res := Result{Verdict: Allow}
	if s.Len() == 0 {
		return res, nil
	}
	evalCtx, cancel := context.WithTimeout(ctx, EvalTimeout)
	defer cancel()
	object := map[string]string{"namespace": in.Namespace, "name": in.Name, "engine": in.Engine}
	changes, addrs := in.variables()
	plan := map[string]any{"changes": changes, "summary": map[string]any{"add": in.Add, "change": in.ChangeCount, "destroy": in.Destroy}}
	var spent uint64
	eval := func(r compiled, vars map[string]any) (bool, error) {
		if err := evalCtx.Err(); err != nil {
			return false, fmt.Errorf("the plan's rules ran out of their %s", EvalTimeout)
		}
		if spent >= PlanCostLimit {
			return false, fmt.Errorf("the plan's rules used their budget of %d cost units", PlanCostLimit)
		}
		out, det, err := r.prg.ContextEval(evalCtx, vars)
		if det != nil && det.ActualCost() != nil {
			spent += *det.ActualCost()
		}
		if err != nil {
			if evalCtx.Err() != nil {
				return false, fmt.Errorf("the plan's rules ran out of their %s", EvalTimeout)
			}
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
		var failed error
		hit := func(addr string) {
			matched = true
			if addr == "" {
				return
			}
			if len(m.Addresses) < maxNamed {
				m.Addresses = append(m.Addresses, addr)
			} else {
				m.AddressesOmitted++
			}
		}
		if r.Plan != "" {
			ok, err := eval(r, map[string]any{"plan": plan, "object": object, "change": map[string]any{}})
			if err != nil && failed == nil {
				failed = err
			}
			if ok || err != nil {
				hit("")
			}
		} else {
			for i, c := range changes {
				ok, err := eval(r, map[string]any{"change": c, "plan": plan, "object": object})
				if err != nil && failed == nil {
					failed = fmt.Errorf("%s: %w", addrs[i], err)
				}
				if ok || err != nil {
					hit(addrs[i])
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		if !matched {
			continue
		}
		if failed != nil {
			m.Message += " (the rule could not decide, and so counts as matching: " + failed.Error() + ")"
		}
		res.Matches = append(res.Matches, m)
		if m.Verdict.severity() > res.Verdict.severity() {
			res.Verdict = m.Verdict
		}
	}
	return res, nil
}

// variables are the `change` values of in's changes (no-op and read changes left out) and
// their addresses, in order. A change whose values are over [MaxValueNodes] gets none: a rule
// reading them cannot decide, and so matches.
func (in Input) variables() (changes []any, addrs []string) {
	for _, c := range in.Changes {
		if slices.Equal(c.Actions, []string{"no-op"}) || slices.Equal(c.Actions, []string{"read"}) {
			continue
		}
		m := map[string]any{"address": c.Address, "type": c.Type, "mode": c.Mode, "actions": slices.Clone(c.Actions)}
		if in.Values {
			budget := MaxValueNodes
			before, after := plain(c.Before, &budget), plain(c.After, &budget)
			if budget >= 0 {
				m["before"], m["after"] = before, after
			}
		}
		changes = append(changes, m)
		addrs = append(addrs, c.Address)
	}
	return changes, addrs
}

// plain converts a JSON-decoded value for CEL: json.Number to an int64 when integral (else a
// float64); maps and lists recursively. Each value it visits spends one of *budget; once it
// is below zero the result is incomplete and must not be used.
func plain(v any, budget *int) any {
	*budget--
	if *budget < 0 {
		return nil
	}
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
			out[k] = plain(e, budget)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e, budget)
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
