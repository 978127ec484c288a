package embedded

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	yaml "go.yaml.in/yaml/v3"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/lang/hclnest"
)

// The evaluation limits of the embedded engine (docs/embedded-engine.md, "Evaluation limits").
// An element is one value inside another, counted deep (a list of three strings is four
// elements); a value that appears in several places counts once per place, as JSON would
// write it. Text is the bytes of strings and the digits of numbers beyond an ordinary
// number's (go-cty writes a number in full: 1e600000000 is 600 million digits).
const (
	// MaxValueElements bounds the elements of one value a function, a for expression or an
	// expression builds.
	MaxValueElements = 1 << 18
	// MaxValueBytes bounds the text of one such value (all its strings and numbers together).
	MaxValueBytes = 16 << 20
	// EvalElements is the element budget of one plan or apply: the elements every function
	// call, for-expression iteration and expression result builds or visits, together.
	EvalElements = 1 << 20
	// EvalBytes is the text budget of one plan or apply: the text functions, templates and
	// expression results build, and the text of the arguments functions read.
	EvalBytes = 128 << 20
	// MaxDefaultElements bounds the elements of a variable's default, which go-cty converts
	// to the variable's type while the configuration is read, where no budget runs: a set of
	// 1,000 numbers that hash alike took 13 s, a tuple of 24,000 values of three types 1 GB.
	MaxDefaultElements = 256
	// MaxBcryptCost is the highest bcrypt cost accepted: OpenTofu's default is 10, and each
	// step doubles the time of a hash (cost 12 takes about a quarter of a second of one CPU;
	// cost 31, which OpenTofu accepts, takes days and cannot be interrupted).
	MaxBcryptCost = 12
	// MaxDecodeDepth bounds how deeply the document jsondecode or yamldecode reads may nest
	// (arrays, objects, sequences, mappings): go-cty builds a nested value's type at every
	// level, so time and memory grow with the square of the depth (a JSON document 10,000
	// levels deep took 1.6 GB and 9 s; a YAML one 100,000 levels deep, 25 s that cannot be
	// interrupted). Configuration documents nest a few dozen levels.
	MaxDecodeDepth = 256
	// EvalRegexpSteps bounds the work of the regular expressions one plan or apply runs
	// (regex, regexall, and replace with a "/pattern/"): Go's regexp runs in time linear in
	// the compiled program's instructions times the input's bytes (about 5 ns per
	// instruction and byte on a 2-core machine, in the worst case), and cannot be
	// interrupted, so each match is charged that product before it runs: about a second of
	// matching in all. A pattern of a few hundred instructions over a megabyte of text fits.
	EvalRegexpSteps = 1 << 28
	// bcryptElements is what a bcrypt hash counts per unit of 2^cost against the element
	// budget: at the default cost 10 one plan or apply hashes up to 64 strings.
	bcryptElements = 16
	// MaxRSAKeyBits is the largest RSA key rsadecrypt accepts, judged by its DER encoding's
	// size before it is parsed: a private-key operation takes time in about the cube of the
	// key's size and cannot be interrupted (a 32,768-bit key took 46 s of CPU, one of
	// 262,144 bits fits in a 1 MiB source and would take about an hour). The keys OpenTofu's
	// users decrypt with (Windows passwords: 2048 or 4096 bits) are far smaller.
	MaxRSAKeyBits = 8192
	// rsaElements is what one rsadecrypt with a key of MaxRSAKeyBits counts against the
	// element budget (a smaller key: by the cube of its size), so one plan or apply decrypts
	// with at most 8 such keys, or 512 of 2048 bits: a few seconds of CPU in all.
	rsaElements = EvalElements / 8
)

// LimitError is an evaluation refused because it would exceed one of the limits above: Func
// names the function, or the construct ("for expression", "template", "tuple", "object",
// "argument of F"), and Reason the limit. It matches [engine.ErrEvaluationLimit]. The message
// holds sizes, never a value.
type LimitError struct {
	Func, Reason string
}

func (e *LimitError) Error() string {
	return e.Func + ": " + e.Reason + " (the embedded engine's evaluation limits, docs/embedded-engine.md)"
}

// Is matches [engine.ErrEvaluationLimit].
func (e *LimitError) Is(target error) bool { return target == engine.ErrEvaluationLimit }

// budgetFunc names the function of an operation's table that returns its budget (a capsule):
// how the syntax-tree checks ([instrument]) find the budget from an evaluation context. A
// table without it (the plain [Functions]) evaluates without limits.
const budgetFunc = "lava::budget"

var budgetType = cty.Capsule("budget", reflect.TypeOf(budget{}))

// budget is the evaluation budget of one plan or apply: what is left of [EvalElements] and
// [EvalBytes], and the operation's context (checked before every function call and
// for-expression iteration). The first limit exceeded, or the end of the context, stops every
// later function call of the operation (try and can cannot hide it).
type budget struct {
	elems, bytes atomic.Int64
	regexpSteps  atomic.Int64
	stop         atomic.Pointer[error]
	// ended is the operation's context's Done channel, cause its cause.
	ended <-chan struct{}
	cause func() error
	now   time.Time

	funcsOnce sync.Once
	funcs     map[string]function.Function
}

// newBudget returns the budget of an operation running under ctx.
func newBudget(ctx context.Context) *budget {
	b := &budget{now: time.Now(), ended: ctx.Done(), cause: func() error { return context.Cause(ctx) }}
	b.elems.Store(EvalElements)
	b.bytes.Store(EvalBytes)
	b.regexpSteps.Store(EvalRegexpSteps)
	return b
}

// err is the error that stopped the evaluation (a limit, or the context's end), or nil.
func (b *budget) err() error {
	if p := b.stop.Load(); p != nil {
		return *p
	}
	select {
	case <-b.ended:
		return b.fail(fmt.Errorf("evaluation stopped: %w", b.cause()))
	default:
		return nil
	}
}

// fail records err as what stopped the evaluation (the first one wins) and returns it.
func (b *budget) fail(err error) error {
	b.stop.CompareAndSwap(nil, &err)
	return *b.stop.Load()
}

// charge takes elems and bytes from the budget; what names the function or construct.
func (b *budget) charge(what string, elems, bytes int64) error {
	if err := b.err(); err != nil {
		return err
	}
	// Clamped, so that the counters, negative once exceeded, never wrap around.
	elems, bytes = min(elems, EvalElements+1), min(bytes, EvalBytes+1)
	if elems > 0 && b.elems.Add(-elems) < 0 {
		return b.fail(&LimitError{Func: what, Reason: fmt.Sprintf("this plan or apply would build or visit more than %d elements", EvalElements)})
	}
	if bytes > 0 && b.bytes.Add(-bytes) < 0 {
		return b.fail(&LimitError{Func: what, Reason: fmt.Sprintf("this plan or apply would build or read more than %d bytes of text", EvalBytes)})
	}
	return nil
}

// expect refuses a result of elems elements and bytes string bytes before it is built: over
// one value's limits, or over what is left of the budget; otherwise it charges them.
func (b *budget) expect(what string, elems, bytes int64) error {
	if elems > MaxValueElements {
		return b.fail(&LimitError{Func: what, Reason: fmt.Sprintf("the result would have %d elements, more than %d, the limit of one value", elems, MaxValueElements)})
	}
	if bytes > MaxValueBytes {
		return b.fail(&LimitError{Func: what, Reason: fmt.Sprintf("the result would have %d bytes of text, more than %d, the limit of one value", bytes, MaxValueBytes)})
	}
	return b.charge(what, elems, bytes)
}

// value checks a value built by what against one value's limits and charges its size. It
// stops counting at the limits (a value that shares one part many times is not walked to
// its end).
func (b *budget) value(what string, v cty.Value) error {
	if err := b.err(); err != nil {
		return err
	}
	maxE := min(MaxValueElements, max(b.elems.Load(), 0)) + 1
	maxB := min(MaxValueBytes, max(b.bytes.Load(), 0)) + 1
	e, by, digits := valueSize(v, maxE, maxB)
	if e > MaxValueElements {
		return b.fail(&LimitError{Func: what, Reason: fmt.Sprintf("the value has more than %d elements, the limit of one value", MaxValueElements)})
	}
	if by > MaxValueBytes {
		return b.fail(&LimitError{Func: what, Reason: fmt.Sprintf("the value has more than %d bytes of text, the limit of one value", MaxValueBytes)})
	}
	if digits > MaxNumberText {
		// Every later plan, scan and destroy would parse it again from the state (math/big's
		// decimal parsing takes time in the square of the digits).
		return b.fail(&LimitError{Func: what, Reason: fmt.Sprintf("the value holds a number of about %d digits, more than %d, the limit of a number's text", digits, MaxNumberText)})
	}
	return b.charge(what, e, by)
}

// provided charges a value a provider returned (a refreshed object, an imported one, a data
// source's result) by its size, as a value built: each is written into the plan, the state and
// the drift findings at its own place (one stored file read back by 160 data sources was 160
// copies, 5 GB). It has no limit of one value: what a provider holds is not the tenant's
// expression. what names the address and the call.
func (b *budget) provided(what string, v cty.Value) error {
	if err := b.err(); err != nil {
		return err
	}
	e, by, _ := valueSize(v, max(b.elems.Load(), 0)+1, max(b.bytes.Load(), 0)+1)
	return b.charge(what, e, by)
}

// valueSize counts the elements and text of v, deep, stopping once either reaches its
// maximum, and finds the most digits beyond an ordinary number's of a number in it
// ([numberDigits]). Marks, unknown and null values are allowed.
func valueSize(v cty.Value, maxElems, maxBytes int64) (elems, bytes, digits int64) {
	stack := []cty.Value{v}
	for len(stack) > 0 && elems < maxElems && bytes < maxBytes {
		x, _ := stack[len(stack)-1].Unmark()
		stack = stack[:len(stack)-1]
		elems++
		if !x.IsKnown() || x.IsNull() {
			continue
		}
		ty := x.Type()
		switch {
		case ty == cty.String:
			bytes += int64(len(x.AsString()))
		case ty == cty.Number:
			d := numberDigits(x)
			bytes += d
			digits = max(digits, d)
		case ty.IsCollectionType() || ty.IsTupleType() || ty.IsObjectType():
			for it := x.ElementIterator(); it.Next() && elems+int64(len(stack)) < maxElems; {
				_, e := it.Element()
				stack = append(stack, e)
			}
		}
	}
	return elems, bytes, digits
}

// maxOrdinaryPrec is the mantissa precision in bits beyond which numberDigits counts a
// number's precision as it counts its exponent.
const maxOrdinaryPrec = 4096

// numberDigits is how many more digits than an ordinary number's (40) the decimal text of a
// known number has: about 0.3 per bit of its binary exponent, either way (a tiny number is
// written with as many zeros).
func numberDigits(v cty.Value) int64 {
	f := v.AsBigFloat()
	if f.IsInf() {
		return 0
	}
	exp := int64(f.MantExp(nil))
	if exp < 0 {
		exp = -exp
	}
	// A mantissa far more precise than a parsed number's (go-cty parses with 512 bits) is held
	// in memory whatever the value: 1e600000000 % 3 is 1 with 2 billion bits.
	if p := int64(f.Prec()) - maxOrdinaryPrec; p > exp {
		exp = p
	}
	return max(0, exp*30103/100000-40)
}

// functions returns the operation's function table: [sharedFunctions], each function guarded
// by the budget ([budget.guard]), templatestring evaluating with the guarded table, and
// plantimestamp the operation's start. It is built once per budget.
func (b *budget) functions() map[string]function.Function {
	b.funcsOnce.Do(func() {
		shapes := guardShapes()
		out := make(map[string]function.Function, len(sharedFunctions())+4)
		guarded := make(map[string]function.Function, len(shapes))
		for name, plain := range guardedNames() {
			g, ok := guarded[plain]
			if !ok {
				g = b.guard(shapes[plain])
				guarded[plain] = g
			}
			out[name] = g
		}
		out["plantimestamp"] = b.guard(shapeOf("plantimestamp", planTimestampFunc(b.now.UTC().Truncate(time.Second))))
		out["templatestring"] = b.guard(shapeOf("templatestring", templateStringFunc(sync.OnceValue(func() map[string]function.Function {
			return withoutTemplateString(out)
		}))))
		out["core::plantimestamp"], out["core::templatestring"] = out["plantimestamp"], out["templatestring"]
		out[budgetFunc] = function.New(&function.Spec{
			Type: function.StaticReturnType(budgetType),
			Impl: func([]cty.Value, cty.Type) (cty.Value, error) { return cty.CapsuleVal(budgetType, b), nil },
		})
		b.funcs = out
	})
	return b.funcs
}

// guardShape is what [budget.guard] needs of a function, computed once per process: the
// function, its parameters accepting every value (the function itself checks them) and its
// estimate.
type guardShape struct {
	name   string
	f      function.Function
	params []function.Parameter
	vp     *function.Parameter
	pre    precheck
	// convert holds, for each parameter (the variadic one last) that the guard declares
	// DynamicPseudoType in place of the function's own type, that type: the guard converts
	// the argument itself ([budget.prepare]), where hcl would have before the guard could
	// bound the conversion. cty.NilType: the parameter is passed as hcl converted it.
	convert []cty.Type
}

func shapeOf(name string, f function.Function) *guardShape {
	allow := func(p function.Parameter) function.Parameter {
		p.AllowMarked, p.AllowUnknown, p.AllowNull, p.AllowDynamicType = true, true, true, true
		return p
	}
	params := f.Params()
	sh := &guardShape{name: name, f: f, params: make([]function.Parameter, len(params)), pre: prechecks[name],
		convert: make([]cty.Type, len(params)+1)}
	for i, p := range params {
		sh.params[i] = allow(p)
		if boundedConversion(p.Type) {
			sh.convert[i], sh.params[i].Type = p.Type, cty.DynamicPseudoType
		}
	}
	if v := f.VarParam(); v != nil {
		c := allow(*v)
		if boundedConversion(v.Type) {
			sh.convert[len(params)], c.Type = v.Type, cty.DynamicPseudoType
		}
		sh.vp = &c
	}
	return sh
}

// boundedConversion reports whether converting an argument to a parameter of type ty can cost
// far more than the argument's size, so the guard converts it under the budget: a number
// (from a string: Go's decimal parsing takes time in the square of the digits) and a list,
// set or map of any element type (from a tuple or object: go-cty unifies the element types
// comparing every pair).
func boundedConversion(ty cty.Type) bool {
	if ty == cty.Number {
		return true
	}
	return (ty.IsListType() || ty.IsSetType() || ty.IsMapType()) && ty.ElementType() == cty.DynamicPseudoType
}

// MaxNumberText bounds the text a string converted to a number may have (go-cty parses it
// with math/big, whose decimal parsing takes time in the square of the digits: 4 million
// digits took 30 s of CPU that nothing could interrupt). A number written out has a few dozen.
const MaxNumberText = 4096

// prepare returns args converted as hcl would have converted them to sh's parameters, under
// the budget: a tuple (or object) whose elements all have one type becomes the list (map) of
// them first, which is what go-cty's unification would make, at the cost of one pass; one of
// several element types is charged the pairs go-cty compares; a string for a number is refused
// over MaxNumberText. tolist, toset and tomap, which convert their argument themselves, get
// the same first step. Errors: a [LimitError], or the conversion's as a function.ArgError.
func (b *budget) prepare(sh *guardShape, args []cty.Value) ([]cty.Value, error) {
	var out []cty.Value
	for i, a := range args {
		want := sh.convert[min(i, len(sh.convert)-1)]
		toCollection := i == 0 && (sh.name == "tolist" || sh.name == "toset" || sh.name == "tomap")
		if want == cty.NilType && !toCollection {
			continue
		}
		if out == nil {
			out = slices.Clone(args)
		}
		a = homogeneous(a)
		if err := b.conversionWork(sh.name, a, want); err != nil {
			return nil, err
		}
		if want.IsSetType() || (toCollection && sh.name == "toset") {
			if err := b.setWork(sh.name, a); err != nil {
				return nil, err
			}
		}
		if want == cty.NilType {
			out[i] = a
			continue
		}
		c, err := convert.Convert(a, want)
		if err != nil {
			return nil, function.NewArgError(i, err)
		}
		out[i] = c
	}
	if err := b.unifyWork(sh.name, args); err != nil {
		return nil, err
	}
	if out == nil {
		return args, nil
	}
	return out, nil
}

// unifyWork charges the type unification of the functions whose type is the unification of
// their arguments' types (coalesce, coalescelist, concat of lists) or of their elements'
// (setproduct): go-cty sorts the types pairwise, comparing every pair even when they are all one
// type (60,001 arguments of two types to coalesce ran the process out of memory; of one type,
// 3 min 40 s). More than [condFreeTypes] types are charged n²/2 elements.
func (b *budget) unifyWork(name string, args []cty.Value) error {
	var n int
	switch name {
	case "coalesce", "coalescelist", "concat":
		n = len(args)
	case "setproduct":
		for _, a := range args {
			n++
			if ty := a.Type(); ty.IsTupleType() {
				n += len(ty.TupleElementTypes()) - 1
			}
		}
	default:
		return nil
	}
	if n <= condFreeTypes {
		return nil
	}
	return b.pairs(name, int64(n))
}

// convertible returns v as it may be converted to want under the budget ([budget.prepare]'s
// rule for a parameter): a tuple or object of one element type as the list or map of it,
// and the work of the conversion refused or charged ([budget.conversionWork],
// [budget.setWork]). Errors wrap [LimitError] and name what.
func (b *budget) convertible(what string, v cty.Value, want cty.Type) (cty.Value, error) {
	if want.IsCollectionType() {
		v = homogeneous(v)
	}
	if err := b.conversionWork(what, v, want); err != nil {
		return cty.NilVal, err
	}
	if want.IsSetType() {
		if err := b.setWork(what, v); err != nil {
			return cty.NilVal, err
		}
	}
	return v, nil
}

// conversionWork refuses or charges the work of converting v to want (see [budget.prepare]):
// a string over MaxNumberText for a number, or the pairs of a tuple's or object's element
// types.
func (b *budget) conversionWork(name string, v cty.Value, want cty.Type) error {
	ty := v.Type()
	switch {
	case want == cty.Number:
		return b.numberText(name, v)
	case ty.IsTupleType():
		return b.pairs(name, int64(len(ty.TupleElementTypes())))
	case ty.IsObjectType():
		return b.pairs(name, int64(len(ty.AttributeTypes())))
	}
	return nil
}

// setWork charges the comparisons of putting v's elements into a set: go-cty's set keeps the
// distinct elements whose hashes are equal in one bucket and compares each new element with
// every one there, and it hashes a number by its first 10 significant digits, so 20,000
// numbers 1e10+i (one bucket) took 40 s. The buckets are counted with cty's own Value.Hash
// and the distinct elements in each by their exact text ([exactKey]); a bucket of b distinct
// elements is charged b(b-1)/2 elements, refused at once past an operation's budget.
func (b *budget) setWork(name string, v cty.Value) error {
	u, _ := v.UnmarkDeep()
	if !u.IsKnown() || u.IsNull() || !u.CanIterateElements() {
		return nil
	}
	buckets := map[int]map[string]bool{}
	var work int64
	for it := u.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if !e.IsWhollyKnown() {
			continue
		}
		h, k := e.Hash(), exactKey(e)
		bucket := buckets[h]
		if bucket == nil {
			bucket = map[string]bool{}
			buckets[h] = bucket
		}
		if !bucket[k] {
			work = addSat(work, int64(len(bucket)))
			bucket[k] = true
		}
	}
	if work > EvalElements {
		return b.fail(&LimitError{Func: name, Reason: fmt.Sprintf(
			"putting %d elements into a set compares %d pairs of them that hash alike, more than %d, the limit of a plan or apply", u.LengthInt(), work, EvalElements)})
	}
	return b.charge(name, work, 0)
}

// exactKey is a text that tells apart any two values a set tells apart: a number written in
// full, a string or boolean as itself, any other value as cty writes it in Go syntax.
func exactKey(v cty.Value) string {
	switch v.Type() {
	case cty.Number:
		return v.AsBigFloat().Text('g', -1)
	case cty.String:
		return v.AsString()
	case cty.Bool:
		return strconv.FormatBool(v.True())
	}
	return v.GoString()
}

// firstArgNumberText is the precheck of a function that reads its first argument as a number
// (tonumber, parseint): [budget.numberText].
func firstArgNumberText(b *budget, name string, args []cty.Value) error {
	if len(args) == 0 || args[0] == cty.NilVal {
		return nil
	}
	return b.numberText(name, args[0])
}

// numberText refuses v, a value about to be read or used as a number, when it is a known
// string whose leading number text ([numberPrefix]) is over MaxNumberText, or a known number
// whose decimal text or precision is ([numberDigits]): math/big parses a decimal in time the
// square of its digits, and arithmetic on a number of huge exponent keeps a mantissa of that
// size (1e600000000 % 3 held 700 MB).
func (b *budget) numberText(name string, v cty.Value) error {
	u, _ := v.Unmark()
	if !u.IsKnown() || u.IsNull() {
		return nil
	}
	switch u.Type() {
	case cty.String:
		if n := numberPrefix(u.AsString()); n > MaxNumberText {
			return b.fail(&LimitError{Func: name, Reason: fmt.Sprintf(
				"a string of %d bytes converted to a number, more than %d, the limit of a number's text", n, MaxNumberText)})
		}
	case cty.Number:
		if d := numberDigits(u); d > MaxNumberText {
			return b.fail(&LimitError{Func: name, Reason: fmt.Sprintf(
				"a number of about %d digits in arithmetic, more than %d, the limit of a number's text", d+40, MaxNumberText)})
		}
	}
	return nil
}

// numberPrefix is the length of the text at the start of s that a decimal parser reads as a
// number before it can fail (digits, signs, a point, exponent letters, spaces): what it costs
// to convert s. A long string that is no number costs nothing.
func numberPrefix(s string) int {
	i := 0
	for i < len(s) && strings.IndexByte("0123456789+-.eE_ \t", s[i]) >= 0 {
		i++
	}
	return i
}

// pairs charges the n²/2 type comparisons of unifying n element types; over the element
// budget of an operation it is refused at once.
func (b *budget) pairs(name string, n int64) error {
	work := mulSat(n, n) / 2
	if work > EvalElements {
		return b.fail(&LimitError{Func: name, Reason: fmt.Sprintf(
			"converting %d elements of different types compares every pair of them, more than %d steps, the limit of a plan or apply", n, EvalElements)})
	}
	return b.charge(name, work, 0)
}

// homogeneous returns a tuple whose elements all have one known type as the list of them, and
// an object whose attributes do as the map of them: what go-cty's conversion to a list, set or
// map of any element type makes, without its pairwise unification. Any other value, and a
// tuple or object of fewer than two elements, is returned as it is.
func homogeneous(v cty.Value) cty.Value {
	ty := v.Type()
	var elems []cty.Type
	switch {
	case ty.IsTupleType():
		elems = ty.TupleElementTypes()
	case ty.IsObjectType():
		for _, t := range ty.AttributeTypes() {
			elems = append(elems, t)
		}
	default:
		return v
	}
	if len(elems) < 2 || elems[0] == cty.DynamicPseudoType {
		return v
	}
	for _, t := range elems[1:] {
		if !t.Equals(elems[0]) {
			return v
		}
	}
	u, marks := v.Unmark()
	switch {
	case u.IsNull():
		return v
	case !u.IsKnown() && ty.IsTupleType():
		return cty.UnknownVal(cty.List(elems[0])).WithMarks(marks)
	case !u.IsKnown():
		return cty.UnknownVal(cty.Map(elems[0])).WithMarks(marks)
	case ty.IsTupleType():
		return cty.ListVal(u.AsValueSlice()).WithMarks(marks)
	default:
		return cty.MapVal(u.AsValueMap()).WithMarks(marks)
	}
}

// guardShapes are the shapes of [sharedFunctions] but templatestring and plantimestamp
// (whose functions are each operation's own), by name without "core::".
var guardShapes = sync.OnceValue(func() map[string]*guardShape {
	out := map[string]*guardShape{}
	for name, plain := range guardedNames() {
		if _, ok := out[plain]; !ok {
			out[plain] = shapeOf(plain, sharedFunctions()[name])
		}
	}
	return out
})

// guardedNames maps each name of [sharedFunctions] but templatestring and plantimestamp (and
// their core:: names) to the name without "core::".
var guardedNames = sync.OnceValue(func() map[string]string {
	out := map[string]string{}
	for name := range sharedFunctions() {
		plain := strings.TrimPrefix(name, "core::")
		if plain != "templatestring" && plain != "plantimestamp" {
			out[name] = plain
		}
	}
	return out
})

// guard returns sh's function bounded by the budget. Before it runs: the operation must not
// be stopped, the call is charged one element, and the estimate of the function (precheck)
// refuses a result over the limits before it is built (the arguments themselves were checked
// and charged as they were evaluated: [instrument]). After: a stopped operation wins over the
// function's answer (so try and can cannot hide a limit), and the result is checked and
// charged ([budget.value]).
func (b *budget) guard(sh *guardShape) function.Function {
	name, f, pre := sh.name, sh.f, sh.pre
	return function.New(&function.Spec{
		Description: f.Description(),
		Params:      sh.params,
		VarParam:    sh.vp,
		Type: func(args []cty.Value) (cty.Type, error) {
			if err := b.err(); err != nil {
				return cty.NilType, err
			}
			args, err := b.prepare(sh, args)
			if err != nil {
				return cty.NilType, err
			}
			if pre != nil {
				if err := pre(b, name, knownArgs(args)); err != nil {
					return cty.NilType, err
				}
			}
			ty, err := f.ReturnTypeForValues(args)
			if serr := b.err(); serr != nil {
				return cty.NilType, serr // try and can evaluate their arguments here
			}
			return ty, err
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if err := b.charge(name, 1, 0); err != nil {
				return cty.NilVal, err
			}
			args, err := b.prepare(sh, args)
			if err != nil {
				return cty.NilVal, err
			}
			v, err := f.Call(args)
			if serr := b.err(); serr != nil {
				return cty.NilVal, serr
			}
			if err != nil {
				var w *workError
				if errors.As(err, &w) {
					if cerr := b.charge(name, 0, w.bytes); cerr != nil {
						return cty.NilVal, cerr
					}
				}
				return v, err
			}
			if err := b.value(name, v); err != nil {
				return cty.NilVal, err
			}
			return v, nil
		},
	})
}

// knownArgs returns args unmarked (shallow), with cty.NilVal for an unknown or null one: a
// precheck estimates from what is known.
func knownArgs(args []cty.Value) []cty.Value {
	out := make([]cty.Value, len(args))
	for i, a := range args {
		a, _ = a.Unmark()
		if a.IsKnown() && !a.IsNull() {
			out[i] = a
		}
	}
	return out
}

// precheck estimates, from a call's known arguments (cty.NilVal: unknown or null), the size
// of its result or the work it does, and refuses or charges it before the function runs.
type precheck func(b *budget, name string, args []cty.Value) error

// prechecks are the estimates of the functions whose result or work can be far larger than
// their arguments: a product of collections, a padding or width, a separator or replacement
// repeated, a document's aliases expanded, or every element compared with every other.
// (Every function's arguments are checked and charged as they are evaluated: [instrument].)
var prechecks = map[string]precheck{
	"setproduct": func(b *budget, name string, args []cty.Value) error {
		n := int64(1)
		for _, a := range args {
			if a == cty.NilVal || !a.CanIterateElements() {
				return nil
			}
			n = mulSat(n, int64(a.LengthInt()))
		}
		return b.expect(name, mulSat(n, int64(len(args))+1), 0)
	},
	"indent": func(b *budget, name string, args []cty.Value) error {
		spaces, ok := intArg(args, 0)
		if !ok {
			return nil
		}
		if spaces < 0 {
			return b.fail(&LimitError{Func: name, Reason: "the number of spaces must not be negative"})
		}
		s, _ := strArg(args, 1)
		return b.expect(name, 1, addSat(addSat(spaces, int64(len(s))), mulSat(spaces, int64(strings.Count(s, "\n")))))
	},
	// A template built at run time is refused before it is lexed, as a configuration's
	// document is (hclnest.MaxSequences).
	"templatestring": func(b *budget, name string, args []cty.Value) error {
		s, ok := strArg(args, 0)
		if !ok {
			return nil
		}
		if err := hclnest.SequencesError([]byte(s)); err != nil {
			return b.fail(&LimitError{Func: name, Reason: err.Error()})
		}
		return nil
	},
	"tonumber":   firstArgNumberText,
	"parseint":   firstArgNumberText,
	"format":     formatPrecheck,
	"formatlist": formatPrecheck,
	"join": func(b *budget, name string, args []cty.Value) error {
		sep, ok := strArg(args, 0)
		if !ok {
			return nil
		}
		var n, size int64
		for _, l := range args[1:] {
			if l == cty.NilVal {
				return nil
			}
			e, by, _ := valueSize(l, MaxValueElements+1, MaxValueBytes+1)
			n, size = addSat(n, e), addSat(size, by)
		}
		return b.expect(name, 1, addSat(size, mulSat(n, int64(len(sep)))))
	},
	"replace": func(b *budget, name string, args []cty.Value) error {
		s, ok1 := strArg(args, 0)
		sub, ok2 := strArg(args, 1)
		rep, ok3 := strArg(args, 2)
		if !ok1 || !ok2 || !ok3 {
			return nil
		}
		if len(sub) > 1 && sub[0] == '/' && sub[len(sub)-1] == '/' {
			re, err := b.regexp(name, sub[1:len(sub)-1], s, 2)
			if re == nil {
				return err // nil when replace reports a pattern that does not compile
			}
			n, matched := regexpMatches(re, s)
			refs := int64(strings.Count(rep, "$"))
			return b.expect(name, 1, addSat(addSat(int64(len(s))-matched, mulSat(n, int64(len(rep)))), mulSat(refs, matched)))
		}
		return b.expect(name, 1, replacedSize(s, sub, rep))
	},
	"split": func(b *budget, name string, args []cty.Value) error {
		sep, ok1 := strArg(args, 0)
		s, ok2 := strArg(args, 1)
		if !ok1 || !ok2 {
			return nil
		}
		n := int64(strings.Count(s, sep)) + 1
		if sep == "" {
			n = int64(utf8.RuneCountInString(s)) // one element per character
		}
		return b.expect(name, n+1, int64(len(s)))
	},
	"regexall": func(b *budget, name string, args []cty.Value) error {
		pat, ok1 := strArg(args, 0)
		s, ok2 := strArg(args, 1)
		if !ok1 || !ok2 {
			return nil
		}
		re, err := b.regexp(name, pat, s, 2)
		if re == nil {
			return err // nil when regexall reports a pattern that does not compile
		}
		n, _ := regexpMatches(re, s)
		return b.expect(name, mulSat(n, int64(re.NumSubexp())+2)+1, int64(len(s)))
	},
	"regex": func(b *budget, name string, args []cty.Value) error {
		pat, ok1 := strArg(args, 0)
		s, ok2 := strArg(args, 1)
		if !ok1 || !ok2 {
			return nil
		}
		_, err := b.regexp(name, pat, s, 1)
		return err
	},
	"csvdecode": func(b *budget, name string, args []cty.Value) error {
		s, ok := strArg(args, 0)
		if !ok {
			return nil
		}
		// Each field ends at a comma or a newline: at most one value per separator, plus the
		// rows.
		n := int64(strings.Count(s, ",")+strings.Count(s, "\n")) + 1
		return b.expect(name, 2*n+1, int64(len(s)))
	},
	"sum": func(b *budget, name string, args []cty.Value) error {
		// sum converts each element to a number itself.
		if len(args) == 0 || args[0] == cty.NilVal || !args[0].CanIterateElements() {
			return nil
		}
		for it := args[0].ElementIterator(); it.Next(); {
			if _, e := it.Element(); b.numberText(name, e) != nil {
				return b.err()
			}
		}
		return nil
	},
	"jsondecode": func(b *budget, name string, args []cty.Value) error {
		s, ok := strArg(args, 0)
		if !ok {
			return nil
		}
		d, digits := jsonShape(s)
		if digits > MaxNumberText {
			return b.fail(&LimitError{Func: name, Reason: fmt.Sprintf("a number of %d characters, more than %d, the limit of a number's text", digits, MaxNumberText)})
		}
		if d > MaxDecodeDepth {
			return b.fail(&LimitError{Func: name, Reason: fmt.Sprintf("the document nests more than %d levels deep, the limit of a decoded document", MaxDecodeDepth)})
		}
		// Every value but the first follows a comma, a colon or an opening bracket.
		n := int64(strings.Count(s, ",")+strings.Count(s, ":")+strings.Count(s, "[")+strings.Count(s, "{")) + 1
		return b.expect(name, n, int64(len(s)))
	},
	"yamldecode": func(b *budget, name string, args []cty.Value) error {
		s, ok := strArg(args, 0)
		if !ok {
			return nil
		}
		elems, size, err := yamlExpanded(s)
		if err != nil {
			return b.fail(&LimitError{Func: name, Reason: err.Error()})
		}
		return b.expect(name, elems, size)
	},
	"distinct": func(b *budget, name string, args []cty.Value) error {
		// go-cty compares each element with those kept before it.
		n := collLen(args, 0)
		return b.charge(name, mulSat(n, n)/2, 0)
	},
	"matchkeys": func(b *budget, name string, args []cty.Value) error {
		return b.charge(name, mulSat(collLen(args, 1), collLen(args, 2)), 0)
	},
	"rsadecrypt": rsaKeyPrecheck,
	"bcrypt": func(b *budget, name string, args []cty.Value) error {
		cost := int64(10)
		if len(args) > 1 {
			c, ok := intArg(args, 1)
			if !ok {
				return nil
			}
			cost = c
		}
		if err := bcryptCost(cost); err != nil {
			return b.fail(err)
		}
		if cost < 4 {
			cost = 10 // golang.org/x/crypto/bcrypt uses its default cost below its minimum
		}
		return b.charge(name, bcryptElements<<cost, 0)
	},
}

// rsaKeyPrecheck refuses rsadecrypt's key (args[1], PEM) when its DER encoding is larger than a
// key of [MaxRSAKeyBits] (a PKCS #1 or PKCS #8 private key holds its modulus and private
// exponent and five values of half their size: about 4.5 times the modulus' bytes), and
// charges the decryption by the cube of the key's size ([rsaElements]).
func rsaKeyPrecheck(b *budget, name string, args []cty.Value) error {
	if len(args) < 2 || args[1] == cty.NilVal || args[1].Type() != cty.String {
		return nil
	}
	blk, _ := pem.Decode([]byte(args[1].AsString()))
	if blk == nil {
		return nil // the function says what is wrong with the key
	}
	bits := int64(len(blk.Bytes)) * 8 * 2 / 9
	const slack = 1024 // the encoding's headers, and the exponents' leading bytes
	if bits > MaxRSAKeyBits+slack {
		return b.fail(&LimitError{Func: name, Reason: fmt.Sprintf("the key's encoding (%d bytes) is that of a key of about %d bits, more than %d, the largest accepted",
			len(blk.Bytes), bits, MaxRSAKeyBits)})
	}
	r := float64(bits) / MaxRSAKeyBits
	return b.charge(name, max(1, int64(float64(rsaElements)*r*r*r)), 0)
}

// workError is a function's error that carries what the call built before it failed (the
// bytes base64gunzip decompressed before it found them not UTF-8): the guard charges them,
// so that a call that fails inside try or can is not free to repeat ([budget.guard]).
type workError struct {
	err   error
	bytes int64
}

func (e *workError) Error() string { return e.err.Error() }
func (e *workError) Unwrap() error { return e.err }

// bcryptCost refuses a bcrypt cost above [MaxBcryptCost].
func bcryptCost(cost int64) error {
	if cost > MaxBcryptCost {
		return &LimitError{Func: "bcrypt", Reason: fmt.Sprintf("cost %d is above the highest cost accepted, %d (OpenTofu's default is 10)", cost, MaxBcryptCost)}
	}
	return nil
}

// formatPrecheck bounds format and formatlist: the format's text, each verb's width and
// precision (padding and digits are written out), and the arguments' text, once per element
// for formatlist.
func formatPrecheck(b *budget, name string, args []cty.Value) error {
	f, ok := strArg(args, 0)
	if !ok {
		return nil
	}
	// A numeric verb converts a string argument to a number (%d of "12"): such a string over
	// MaxNumberText is refused.
	for _, i := range numericArgs(f) {
		if i+1 >= len(args) || args[i+1] == cty.NilVal {
			continue
		}
		a := args[i+1]
		if err := b.numberText(name, a); err != nil {
			return err
		}
		if name == "formatlist" && a.CanIterateElements() && a.IsKnown() {
			for it := a.ElementIterator(); it.Next(); {
				if _, e := it.Element(); b.numberText(name, e) != nil {
					return b.err()
				}
			}
		}
	}
	per := addSat(int64(len(f)), formatPadding(f))
	var argBytes int64
	rounds := int64(1)
	for _, a := range args[1:] {
		if a == cty.NilVal {
			continue
		}
		e, by, _ := valueSize(a, MaxValueElements+1, MaxValueBytes+1)
		argBytes = addSat(argBytes, addSat(by, mulSat(e, 24))) // a number's digits, JSON punctuation
		if name == "formatlist" && (a.Type().IsListType() || a.Type().IsTupleType()) {
			rounds = max(rounds, int64(a.LengthInt()))
		}
	}
	return b.expect(name, rounds+1, addSat(mulSat(per, rounds), argBytes))
}

// numericArgs returns the indexes (from 0, among the arguments after the format) of the
// arguments that f's numeric verbs (%d, %f, %e, %E, %g, %G, %x, %X, %o, %b) format, to which
// go-cty converts a string: in order, or as an explicit index ("%[2]d") says.
func numericArgs(f string) []int {
	var out []int
	next := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		if i++; i < len(f) && f[i] == '%' {
			continue
		}
	flags:
		for i < len(f) {
			switch c := f[i]; {
			case c == '[':
				j := strings.IndexByte(f[i:], ']')
				if j < 0 {
					return out
				}
				if n, err := strconv.Atoi(f[i+1 : i+j]); err == nil {
					next = n - 1
				}
				i += j + 1
			case strings.IndexByte("+-# 0123456789.", c) >= 0:
				i++
			default:
				break flags
			}
		}
		if i < len(f) && strings.IndexByte("dfeEgGxXob", f[i]) >= 0 {
			out = append(out, next)
		}
		next++
	}
	return out
}

// formatPadding is the sum of the widths and precisions of f's verbs ("%9.2f": 11), the most
// the verbs can add beyond their arguments' text.
func formatPadding(f string) int64 {
	var total int64
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			continue
		}
		var n int64
		for ; i < len(f); i++ {
			c := f[i]
			switch {
			case c >= '0' && c <= '9':
				n = addSat(mulSat(n, 10), int64(c-'0'))
				continue
			case c == '.' || c == '[' || c == ']' || strings.IndexByte("+-# ", c) >= 0:
				total, n = addSat(total, n), 0
				continue
			}
			break
		}
		total = addSat(total, n)
	}
	return total
}

// regexp compiles pat for a function (name) that matches it over s, runs times (the
// precheck's count of the matches, then the function's own), and charges the work against
// [EvalRegexpSteps] first: the compiled program's instructions times len(s)+1, per run. It
// returns nil and nil for a pattern that does not compile (the function reports it), and nil
// and a [LimitError] when the budget would be exceeded.
func (b *budget) regexp(name, pat, s string, runs int64) (*regexp.Regexp, error) {
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, nil
	}
	parsed, err := syntax.Parse(pat, syntax.Perl)
	if err != nil {
		return nil, nil
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, nil
	}
	steps := mulSat(mulSat(int64(len(prog.Inst)), int64(len(s))+1), runs)
	if b.regexpSteps.Add(-min(steps, EvalRegexpSteps+1)) < 0 {
		return nil, b.fail(&LimitError{Func: name, Reason: fmt.Sprintf(
			"matching a pattern of %d instructions over %d bytes takes %d steps; this plan or apply may take %d, the limit of its regular expressions",
			len(prog.Inst), len(s), steps, EvalRegexpSteps)})
	}
	return re, nil
}

// replacedSize is the length of replace(s, sub, rep) for a plain substring sub (a regular
// expression is measured by the "replace" precheck).
func replacedSize(s, sub, rep string) int64 {
	n := int64(strings.Count(s, sub))
	if sub == "" {
		n = int64(utf8.RuneCountInString(s)) + 1
	}
	return addSat(int64(len(s)), mulSat(n, int64(len(rep)-len(sub))))
}

// regexpMatches counts re's matches in s and their total length, without building them.
func regexpMatches(re *regexp.Regexp, s string) (n, size int64) {
	re.ReplaceAllStringFunc(s, func(m string) string {
		n++
		size += int64(len(m))
		return ""
	})
	return n, size
}

// jsonShape returns the deepest nesting of arrays and objects in a JSON text and the length
// of its longest run of number characters (go-cty parses each number with math/big), both
// outside strings; an unbalanced text is measured as far as it goes.
func jsonShape(s string) (deepest, longestNumber int) {
	depth, run := 0, 0
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		case strings.IndexByte("0123456789+-.eE", c) >= 0:
			run++
			longestNumber = max(longestNumber, run)
			continue
		}
		run = 0
	}
	return deepest, longestNumber
}

// yamlExpanded counts the elements and scalar bytes of a YAML document with every alias
// expanded, as yamldecode (go-cty-yaml) builds it, without expanding: each node is counted
// once and its count reused (saturating at math.MaxInt64). A document go.yaml.in/yaml/v3
// cannot read is refused (neither its size nor its depth can be bounded: go-cty-yaml's parser
// has no depth limit), and so is one nesting deeper than MaxDecodeDepth.
func yamlExpanded(src string) (elems, size int64, err error) {
	var doc yaml.Node
	if uerr := yaml.Unmarshal([]byte(src), &doc); uerr != nil {
		return 0, 0, fmt.Errorf("the document cannot be read, so its size cannot be bounded (%v)", uerr)
	}
	// e elements and b bytes of text, h the levels of sequences and mappings of the expanded
	// value, as jsonShape counts brackets (an alias takes its anchor's: memoized, an alias
	// chain is measured without expanding it either).
	type count struct{ e, b, h int64 }
	memo := map[*yaml.Node]count{}
	tooLong := 0
	var walk func(n *yaml.Node) count
	walk = func(n *yaml.Node) count {
		if n == nil {
			return count{}
		}
		if c, ok := memo[n]; ok {
			return c
		}
		memo[n] = count{} // an alias cycle counts nothing more
		c := count{e: 1, h: 1}
		switch n.Kind {
		case yaml.AliasNode:
			c = walk(n.Alias)
		case yaml.ScalarNode:
			c.b, c.h = int64(len(n.Value)), 0
			if n.Style == 0 && numberPrefix(n.Value) > MaxNumberText {
				// A plain scalar that reads as a number is parsed with math/big.
				tooLong = len(n.Value)
			}
		default:
			for _, ch := range n.Content {
				x := walk(ch)
				c.e, c.b, c.h = addSat(c.e, x.e), addSat(c.b, x.b), max(c.h, x.h+1)
			}
		}
		memo[n] = c
		return c
	}
	c := walk(&doc)
	// The document node counts a level of its own.
	if c.h-1 > MaxDecodeDepth {
		return 0, 0, fmt.Errorf("the document nests more than %d levels deep, the limit of a decoded document", MaxDecodeDepth)
	}
	if tooLong > 0 {
		return 0, 0, fmt.Errorf("a number of %d characters, more than %d, the limit of a number's text", tooLong, MaxNumberText)
	}
	return c.e, c.b, nil
}

// instrument adds the evaluation limits' checks to a parsed template, by wrapping its nodes in
// nodes that embed them (ranges, children and diagnostics stay the original's):
//   - every argument of a function call, every element a for expression yields, and every
//     tuple, object, for expression or template of several parts, wherever it stands (the
//     template itself too), is a checked value ([checkExpr]): refused over one value's limits,
//     else charged, before a function or an operator walks it. go-cty walks every argument of
//     every call (for marks) before the function runs, so a value that repeats another one
//     many times must be refused before it reaches a call;
//   - a for expression's collection charges one element per iteration before the first;
//   - a template's interpolated parts charge their bytes as they are joined.
//
// Object keys are left alone: hcl reads a bare name there as a literal key.
func instrument(x hclsyntax.Expression) hclsyntax.Expression {
	_ = hclsyntax.Walk(x, walker(func(n hclsyntax.Node) {
		switch n := n.(type) {
		case *hclsyntax.FunctionCallExpr:
			for i, a := range n.Args {
				n.Args[i] = checked("argument of "+n.Name, a)
			}
		case *hclsyntax.ForExpr:
			n.CollExpr = check(built(n.CollExpr), checkIterate, "for expression")
			n.ValExpr = checked("for expression", n.ValExpr)
			if n.KeyExpr != nil {
				n.KeyExpr = built(n.KeyExpr)
			}
			if n.CondExpr != nil {
				n.CondExpr = built(n.CondExpr)
			}
		case *hclsyntax.TemplateExpr:
			if n.IsStringLiteral() {
				return
			}
			for i, p := range n.Parts {
				if _, lit := p.(*hclsyntax.LiteralValueExpr); !lit {
					n.Parts[i] = check(built(p), checkPart, "template")
				}
			}
		case *hclsyntax.TupleConsExpr:
			for i, e := range n.Exprs {
				n.Exprs[i] = built(e)
			}
		case *hclsyntax.ObjectConsExpr:
			for i := range n.Items {
				n.Items[i].ValueExpr = built(n.Items[i].ValueExpr)
			}
		case *hclsyntax.ConditionalExpr:
			n.Condition, n.TrueResult, n.FalseResult = built(n.Condition), built(n.TrueResult), built(n.FalseResult)
		case *hclsyntax.BinaryOpExpr:
			n.LHS, n.RHS = built(n.LHS), built(n.RHS)
			switch {
			case numericOp(n.Op):
				n.LHS, n.RHS = check(n.LHS, checkNumber, "operand"), check(n.RHS, checkNumber, "operand")
			case n.Op == hclsyntax.OpEqual || n.Op == hclsyntax.OpNotEqual:
				// go-cty's equality walks both operands whole (and their marks): each
				// comparison is charged their elements and text.
				n.LHS, n.RHS = checked("operand of a comparison", n.LHS), checked("operand of a comparison", n.RHS)
			}
		case *hclsyntax.UnaryOpExpr:
			n.Val = built(n.Val)
			if n.Op == hclsyntax.OpNegate {
				n.Val = check(n.Val, checkNumber, "operand")
			}
		case *hclsyntax.IndexExpr:
			// A list's index converts a string key to a number.
			n.Collection, n.Key = built(n.Collection), check(built(n.Key), checkNumber, "index")
		case *hclsyntax.SplatExpr:
			n.Source = built(n.Source)
		case *hclsyntax.RelativeTraversalExpr:
			n.Source = built(n.Source)
		case *hclsyntax.ParenthesesExpr:
			n.Expression = built(n.Expression)
		case *hclsyntax.TemplateWrapExpr:
			n.Wrapped = built(n.Wrapped)
		}
	}))
	return built(x)
}

// built is x as a checked value when x builds one (a tuple, an object, a for expression, a
// template of several parts), a conditional whose result types are unified under the budget
// ([condExpr]), else x.
func built(x hclsyntax.Expression) hclsyntax.Expression {
	switch x := x.(type) {
	case *hclsyntax.ConditionalExpr:
		return condExpr{x}
	case *hclsyntax.TupleConsExpr:
		return check(x, checkValue, "tuple")
	case *hclsyntax.ObjectConsExpr:
		return check(x, checkValue, "object")
	case *hclsyntax.ForExpr:
		return check(x, checkValue, "for expression")
	case *hclsyntax.TemplateExpr:
		if len(x.Parts) > 1 && !x.IsStringLiteral() {
			return check(x, checkValue, "template")
		}
	}
	return x
}

// checked is x as a checked value (a literal needs no check).
func checked(what string, x hclsyntax.Expression) hclsyntax.Expression {
	if c, ok := x.(*hclsyntax.ConditionalExpr); ok {
		x = condExpr{c}
	}
	switch c := x.(type) {
	case *hclsyntax.LiteralValueExpr:
		return x
	case checkExpr:
		if c.kind == checkValue {
			return x
		}
	}
	return check(x, checkValue, what)
}

// walker calls exit on every node after its children.
type walker func(hclsyntax.Node)

func (w walker) Enter(hclsyntax.Node) hcl.Diagnostics  { return nil }
func (w walker) Exit(n hclsyntax.Node) hcl.Diagnostics { w(n); return nil }

// checkKind is what a [checkExpr] does with its expression's value.
type checkKind int

const (
	// checkValue: checked against one value's limits and charged ([budget.value]).
	checkValue checkKind = iota
	// checkIterate: a for expression's collection, one element per iteration charged before
	// the first.
	checkIterate
	// checkPart: a template's interpolated part, its text checked and charged before the
	// template writes it out.
	checkPart
	// checkNumber: an operand of arithmetic or a comparison, which hcl converts to a number: a
	// string over MaxNumberText is refused ([budget.numberText]).
	checkNumber
)

// numericOp reports whether op converts its operands to numbers (arithmetic and ordering).
func numericOp(op *hclsyntax.Operation) bool {
	switch op {
	case hclsyntax.OpAdd, hclsyntax.OpSubtract, hclsyntax.OpMultiply, hclsyntax.OpDivide, hclsyntax.OpModulo,
		hclsyntax.OpGreaterThan, hclsyntax.OpGreaterThanOrEqual, hclsyntax.OpLessThan, hclsyntax.OpLessThanOrEqual:
		return true
	}
	return false
}

// checkExpr is an expression whose value is checked by kind; what names it in the error. It
// wraps the expression as hcl's own grouping parentheses do, so that a walk of the syntax tree
// (hclsyntax.Variables, which try and can use) still reaches it.
type checkExpr struct {
	*hclsyntax.ParenthesesExpr
	kind checkKind
	what string
}

// check returns x checked by kind.
func check(x hclsyntax.Expression, kind checkKind, what string) checkExpr {
	return checkExpr{&hclsyntax.ParenthesesExpr{Expression: x, SrcRange: x.Range()}, kind, what}
}

func (x checkExpr) Value(ctx *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	v, diags := x.Expression.Value(ctx)
	b := budgetOf(ctx)
	if b == nil {
		return v, diags
	}
	err := b.err()
	if u, _ := v.Unmark(); err == nil {
		known := u.IsKnown() && !u.IsNull()
		switch {
		case x.kind == checkValue:
			err = b.value(x.what, u)
		case x.kind == checkIterate && known && u.CanIterateElements():
			err = b.charge(x.what, int64(u.LengthInt()), 0)
		case x.kind == checkPart && known && u.Type().IsPrimitiveType():
			err = b.value(x.what, u) // a string, or a number about to be written out
		case x.kind == checkNumber:
			err = b.numberText(x.what, u)
		}
	}
	if err != nil {
		return cty.DynamicVal, append(diags, stopDiag(err, x.Range()))
	}
	return v, diags
}

// budgetOf returns the budget of ctx's function table ([budgetFunc]), or nil.
func budgetOf(ctx *hcl.EvalContext) *budget {
	for c := ctx; c != nil; c = c.Parent() {
		f, ok := c.Functions[budgetFunc]
		if !ok {
			continue
		}
		v, err := f.Call(nil)
		if err != nil {
			return nil
		}
		return v.EncapsulatedValue().(*budget)
	}
	return nil
}

// stopDiag is the diagnostic of an evaluation stopped at rng by err (a [LimitError], or the
// end of the operation's context).
func stopDiag(err error, rng hcl.Range) *hcl.Diagnostic {
	summary := "Evaluation stopped"
	if le := (*LimitError)(nil); errors.As(err, &le) {
		summary = "Evaluation limit exceeded"
	}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: err.Error(), Subject: rng.Ptr(), Extra: stopExtra{err}}
}

// limitDiags returns the first diagnostic of a stopped evaluation in diags alone, when there
// is one (what follows a stop is its echo: every later check of the operation fails the same
// way, once per remaining iteration), else diags. A function call that failed with a
// [LimitError] is rewritten: the summary says so, the detail is the limit (never a value, so
// it stays visible next to sensitive values), and Extra carries the error for [diagError].
func limitDiags(diags hcl.Diagnostics) hcl.Diagnostics {
	for _, d := range diags {
		err := stopOf(d)
		if err == nil {
			continue
		}
		if _, done := d.Extra.(stopExtra); done {
			return hcl.Diagnostics{d}
		}
		c := *d
		c.Summary, c.Detail = "Evaluation limit exceeded", err.Error()
		c.Expression, c.EvalContext, c.Extra = nil, nil, stopExtra{err}
		if c.Context != nil {
			c.Subject = c.Context
		}
		return hcl.Diagnostics{&c}
	}
	return diags
}

// stopExtra is the Extra of a diagnostic of a stopped evaluation (stopDiag, limitDiags): the
// error, a [LimitError] or the operation context's.
type stopExtra struct{ err error }

// stopOf returns the error that stopped the evaluation a diagnostic reports, or nil.
func stopOf(d *hcl.Diagnostic) error {
	if x, ok := d.Extra.(stopExtra); ok {
		return x.err
	}
	var le *LimitError
	if x, ok := d.Extra.(hclsyntax.FunctionCallDiagExtra); ok && errors.As(x.FunctionCallError(), &le) {
		return le
	}
	return nil
}

// Saturating arithmetic for estimates.
func addSat(a, b int64) int64 {
	if s := a + b; s >= a && s >= b {
		return s
	}
	return math.MaxInt64
}

func mulSat(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

func strArg(args []cty.Value, i int) (string, bool) {
	if i >= len(args) || args[i] == cty.NilVal || args[i].Type() != cty.String {
		return "", false
	}
	return args[i].AsString(), true
}

// intArg reads a number argument, saturated to int64.
func intArg(args []cty.Value, i int) (int64, bool) {
	if i >= len(args) || args[i] == cty.NilVal || args[i].Type() != cty.Number {
		return 0, false
	}
	f := args[i].AsBigFloat()
	if f.IsInf() {
		if f.Sign() > 0 {
			return math.MaxInt64, true
		}
		return math.MinInt64, true
	}
	n, _ := f.Int64()
	return n, true
}

// collLen is the length of a known collection argument, else 0.
func collLen(args []cty.Value, i int) int64 {
	if i >= len(args) || args[i] == cty.NilVal || !args[i].CanIterateElements() {
		return 0
	}
	return int64(args[i].LengthInt())
}

// condExpr is a conditional whose two results' types are unified under the budget: hcl unifies
// them with go-cty's convert.UnifyUnsafe, which, for two tuples of different lengths, sorts
// every element type of both against every other (pairwise, memory growing with the square,
// and no context is checked: 60,000 elements of two types took gigabytes). It evaluates the
// results itself, turns two tuples of different lengths whose elements all have one type into
// the lists hcl would unify them to (without the sort), charges the unification of any other
// two different types carrying more than [condFreeTypes] element types by the square of their
// count ([budget.pairs]), and leaves the rest (condition, marks, unknowns, errors) to hcl's
// own ConditionalExpr over the two values. It embeds the original, so walks of the syntax tree
// still reach its children.
type condExpr struct {
	*hclsyntax.ConditionalExpr
}

// condFreeTypes is how many element types two different result types may carry before their
// unification is charged.
const condFreeTypes = 64

func (x condExpr) Value(ctx *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	tv, tdiags := x.TrueResult.Value(ctx)
	fv, fdiags := x.FalseResult.Value(ctx)
	if !tdiags.HasErrors() && !fdiags.HasErrors() {
		tv, fv = sameTypeLists(tv, fv)
		if b := budgetOf(ctx); b != nil && !tv.Type().Equals(fv.Type()) &&
			addSat(elementTypes(tv.Type(), condFreeTypes+1), elementTypes(fv.Type(), condFreeTypes+1)) > condFreeTypes {
			if err := b.pairs("conditional", addSat(elementTypes(tv.Type(), EvalElements), elementTypes(fv.Type(), EvalElements))); err != nil {
				return cty.DynamicVal, hcl.Diagnostics{stopDiag(err, x.Range())}
			}
		}
	}
	// hcl reports the diagnostics of the result it selects only.
	inner := &hclsyntax.ConditionalExpr{Condition: x.Condition, SrcRange: x.SrcRange,
		TrueResult:  resultExpr{&hclsyntax.LiteralValueExpr{Val: tv, SrcRange: x.TrueResult.Range()}, tdiags},
		FalseResult: resultExpr{&hclsyntax.LiteralValueExpr{Val: fv, SrcRange: x.FalseResult.Range()}, fdiags}}
	return inner.Value(ctx)
}

// resultExpr is a conditional's result already evaluated: its value and diagnostics.
type resultExpr struct {
	*hclsyntax.LiteralValueExpr
	diags hcl.Diagnostics
}

func (x resultExpr) Value(*hcl.EvalContext) (cty.Value, hcl.Diagnostics) { return x.Val, x.diags }

// sameTypeLists returns two tuple values of different lengths whose elements all have one
// known type T as lists of T, the type go-cty unifies them to, and any other two values as they
// are.
func sameTypeLists(a, b cty.Value) (cty.Value, cty.Value) {
	at, bt := a.Type(), b.Type()
	if !at.IsTupleType() || !bt.IsTupleType() || len(at.TupleElementTypes()) == len(bt.TupleElementTypes()) {
		return a, b
	}
	var elem cty.Type
	for _, t := range append(slices.Clone(at.TupleElementTypes()), bt.TupleElementTypes()...) {
		switch {
		case t == cty.DynamicPseudoType:
			return a, b
		case elem == cty.NilType:
			elem = t
		case !t.Equals(elem):
			return a, b
		}
	}
	if elem == cty.NilType {
		return a, b // two empty tuples have the same length
	}
	return tupleAsList(a, elem), tupleAsList(b, elem)
}

// tupleAsList is the tuple v, whose elements all have type elem, as a list of elem.
func tupleAsList(v cty.Value, elem cty.Type) cty.Value {
	u, marks := v.Unmark()
	switch {
	case u.IsNull():
		return cty.NullVal(cty.List(elem)).WithMarks(marks)
	case !u.IsKnown():
		return cty.UnknownVal(cty.List(elem)).WithMarks(marks)
	case u.LengthInt() == 0:
		return cty.ListValEmpty(elem).WithMarks(marks)
	}
	return cty.ListVal(u.AsValueSlice()).WithMarks(marks)
}

// elementTypes counts the element types inside t, deep (a tuple's elements, an object's
// attributes and a collection's element type, and theirs), up to limit.
func elementTypes(t cty.Type, limit int64) int64 {
	var n int64
	var walk func(t cty.Type)
	walk = func(t cty.Type) {
		if n >= limit {
			return
		}
		switch {
		case t.IsTupleType():
			for _, e := range t.TupleElementTypes() {
				n++
				walk(e)
			}
		case t.IsObjectType():
			for _, e := range t.AttributeTypes() {
				n++
				walk(e)
			}
		case t.IsCollectionType():
			n++
			walk(t.ElementType())
		}
	}
	walk(t)
	return min(n, limit)
}
