package tlisp

import (
	"github.com/lava-operator/lava/internal/lang/arch"
)

// EvaluatorVersion identifies this evaluator and the upstream semantics it implements; it goes
// into every RenderRecord.
const EvaluatorVersion = "lava-go/0.1 (lava-eval 0.2 semantics)"

// Bindings are the input values supplied for one evaluation. A key is matched exactly against
// the :inputs names (no kebab/snake folding). When a key is present in several maps the
// precedence is Scalars, then Lists, then Records (as upstream lava-eval).
type Bindings struct {
	Scalars map[string]string
	Lists   map[string][]string
	Records map[string][]map[string]string
}

// EvalArchitecture reads src and evaluates its first deflava-architecture form with b
// (as upstream lava-eval does). It returns the Architecture and every diagnostic (warnings
// included); the Architecture is nil when any diagnostic is an error.
func EvalArchitecture(src []byte, b Bindings, opts Options) (a *arch.Architecture, diags Diagnostics) {
	defer func() {
		if r := recover(); r != nil {
			a = nil
			diags = append(diags, internalError(opts.File, r))
		}
	}()
	forms, pdiags, usable := parse(src, opts)
	if !usable {
		return nil, pdiags
	}
	e := newEvaluator(src, opts)
	e.diags, e.nerr = pdiags, len(pdiags.Errors())
	e.secret = opts.SecretInputs
	form := e.findArchitecture(forms)
	if form == nil {
		return nil, e.diags
	}
	a = e.evalArchitecture(form, b)
	sortDiags(e.diags)
	if e.diags.HasErrors() {
		return nil, e.diags
	}
	return a, e.diags
}

type loopVar struct {
	name, value string
	secret      bool // bound from a secret input
}

type pendingRef struct {
	ref arch.ResourceRef
	pos Pos
}

type pendingImport struct {
	imp arch.Import
	pos Pos
}

type evaluator struct {
	src    []byte
	file   string
	diags  Diagnostics
	nerr   int
	nwarn  int
	full   bool // error cap or resource limit reached: stop evaluating
	limitd bool

	scalars map[string]string
	lists   map[string][]string
	records map[string][]map[string]string
	bad     map[string]bool // inputs whose resolution already reported an error
	loop    []loopVar

	snakeCache map[string]string
	secret     map[string]bool // Options.SecretInputs
	// sequences is Options.TemplateSequences.
	sequences func(s string) [][2]int

	expanded  int
	iters     int
	interpd   int            // bytes built by interpolation so far
	values    int            // values built by evalValue so far ([MaxValues])
	taints    int            // string and symbol values evaluated that use a secret input
	declared  map[string]Pos // resource address -> position of its form
	dataDecl  map[string]Pos // data source address ("type.name") -> position
	modules   map[string]Pos // module name -> position of its form
	omitted   map[string]Pos // resource addresses a false :when dropped
	refs      []pendingRef
	imports   []pendingImport
	moves     []pendingMove
	removed   []pendingRemoved
	resources []arch.Resource
	data      []arch.Resource
}

func newEvaluator(src []byte, opts Options) *evaluator {
	return &evaluator{
		resources: make([]arch.Resource, 0, 16),
		src:       src,
		file:      opts.File,
		sequences: opts.TemplateSequences,
		scalars:   map[string]string{},
		lists:     map[string][]string{},
		records:   map[string][]map[string]string{},
		bad:       map[string]bool{},
		declared:  map[string]Pos{},
		dataDecl:  map[string]Pos{},
		omitted:   map[string]Pos{},
	}
}

// setMap stores v under k in *m, making the map first when it is nil.
func setMap[V any](m *map[string]V, k string, v V) {
	if *m == nil {
		*m = map[string]V{}
	}
	(*m)[k] = v
}

func (e *evaluator) errorf(p Pos, format string, args ...any) {
	if e.nerr >= MaxDiagnostics {
		e.full = true
		return
	}
	e.nerr++
	if e.nerr >= MaxDiagnostics {
		e.full = true
	}
	e.diags = append(e.diags, Diagnostic{Pos: p, Severity: SeverityError, Message: message(format, args...)})
}

func (e *evaluator) warnf(p Pos, format string, args ...any) {
	if e.nwarn >= MaxDiagnostics {
		return
	}
	e.nwarn++
	e.diags = append(e.diags, Diagnostic{Pos: p, Severity: SeverityWarning, Message: message(format, args...)})
}

func (e *evaluator) startPos() Pos { return Pos{File: e.file, Line: 1, Col: 1} }

// findArchitecture returns the first deflava-architecture form, warning about later ones.
func (e *evaluator) findArchitecture(forms []*Node) *Node {
	var first *Node
	for _, f := range forms {
		if f.Head() == "deflava-import" {
			e.warnf(f.Pos, "deflava-import is read but not composed: the imported architecture is not rendered")
			continue
		}
		if f.Head() != "deflava-architecture" {
			continue
		}
		if first == nil {
			first = f
			continue
		}
		e.warnf(f.Pos, "only the first deflava-architecture form (at %s) is evaluated; this one is ignored", first.Pos)
	}
	if first == nil {
		e.errorf(e.startPos(), "expected deflava-architecture form, got no deflava-architecture form (the source needs a (deflava-architecture NAME :resources (...)) form)")
	}
	return first
}

// clauses reads a top-level form's keyword/value pairs from position 2 (as upstream):
// non-keywords are skipped with their partner, a trailing odd element is ignored, the last of a
// repeated clause wins. keys maps a clause name to the keyword node.
func (e *evaluator) clauses(form *Node, what string) (vals, keys map[string]*Node) {
	vals, keys = map[string]*Node{}, map[string]*Node{}
	xs := form.List
	for i := 2; i < len(xs); i += 2 {
		k := xs[i]
		if i+1 >= len(xs) {
			if k.Kind == NodeKeyword {
				e.warnf(k.Pos, "clause :%s has no value (ignored)", k.Text)
			}
			break
		}
		if k.Kind != NodeKeyword {
			e.warnf(k.Pos, "expected a clause keyword in %s, got %s (skipped with the element after it)", what, describe(k))
			continue
		}
		if prev, ok := keys[k.Text]; ok {
			e.warnf(k.Pos, "clause :%s repeats the one at %s; the last one wins", k.Text, prev.Pos)
		}
		vals[k.Text], keys[k.Text] = xs[i+1], k
	}
	return vals, keys
}

func (e *evaluator) evalArchitecture(form *Node, b Bindings) *arch.Architecture {
	a := &arch.Architecture{Name: "anonymous", Outputs: arch.Map{}, Locals: arch.Map{}, Pos: form.Pos, KeyPos: map[string]arch.Pos{},
		Secret: map[string]bool{}, SensitiveOutputs: map[string]bool{}}
	if len(form.List) > 1 && form.List[1].Kind == NodeSymbol {
		a.Name = form.List[1].Text
	}
	vals, keys := e.clauses(form, "deflava-architecture")

	declared := e.evalInputs(vals["inputs"], b)
	e.warnUndeclared(form, keys["inputs"], declared, b)

	if res, ok := vals["resources"]; !ok {
		e.errorf(form.Pos, "missing :resources clause")
	} else if res.Kind != NodeList {
		e.errorf(res.Pos, "expected deflava-architecture form, got :resources not a list (expected :resources ((TYPE \"NAME\" :attr value ...) ...))")
	} else {
		for _, r := range res.List {
			if e.full {
				break
			}
			e.evalEntry(r, false)
		}
	}
	if d, ok := vals["data"]; ok {
		if d.Kind != NodeList {
			e.errorf(d.Pos, ":data not a list (expected ((TYPE \"NAME\" :attr value ...) ...))")
		} else {
			for _, r := range d.List {
				if e.full {
					break
				}
				e.evalEntry(r, true)
			}
		}
	}
	if o, ok := vals["outputs"]; ok {
		e.evalPlist(o, ":outputs", false, &a.Outputs, "output.", a)
	}
	if p, ok := vals["providers"]; ok {
		a.Providers = e.evalProviders(p)
	}
	if l, ok := vals["locals"]; ok {
		e.evalPlist(l, ":locals", true, &a.Locals, "local.", a)
	}
	if m, ok := vals["modules"]; ok {
		a.Modules = e.evalModules(m)
	}
	e.evalBlockClauses(vals, a)
	if r, ok := keys["result"]; ok {
		if _, out := keys["outputs"]; !out {
			e.warnf(r.Pos, ":result is not rendered (it is a consumer-side contract); declare :outputs to render Terraform outputs")
		}
	}
	e.checkRefs()
	e.checkBlocks(a)
	a.Resources = e.resources
	a.DataSources = e.data
	for _, im := range e.imports {
		a.Imports = append(a.Imports, im.imp)
	}
	return a
}
