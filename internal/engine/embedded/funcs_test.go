package embedded

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty/function"

	"github.com/lava-operator/lava/internal/lang/functions"
)

// functionCase is one call of a function: the expression (inside "${...}") and the JSON of
// the value OpenTofu returns for it. TestFunctions checks the embedded engine's value; the
// integration test TestFunctions_tofuOracle checks real tofu returns the same.
type functionCase struct {
	fn, expr, want string
}

var functionCases = []functionCase{
	{"abs", `abs(-12.5)`, `12.5`},
	{"ceil", `ceil(4.1)`, `5`},
	{"floor", `floor(4.9)`, `4`},
	{"log", `log(16, 2)`, `4`},
	{"max", `max(12, 54, 3)`, `54`},
	{"min", `min(12, 54, 3)`, `3`},
	{"parseint", `parseint("FF", 16)`, `255`},
	{"pow", `pow(3, 2)`, `9`},
	{"signum", `signum(-13)`, `-1`},
	{"sum", `sum([10, 13, 6, 4.5])`, `33.5`},
	{"chomp", `chomp("hello\n")`, `"hello"`},
	{"endswith", `endswith("hello world", "world")`, `true`},
	{"format", `format("Hello, %s! %03d %.2f", "Ander", 7, 3.14159)`, `"Hello, Ander! 007 3.14"`},
	{"formatlist", `formatlist("Hello, %s!", ["Valentina", "Ander"])`, `["Hello, Valentina!","Hello, Ander!"]`},
	{"indent", `indent(2, "a\nb")`, `"a\n  b"`},
	{"join", `join(", ", ["foo", "bar", "baz"])`, `"foo, bar, baz"`},
	{"lower", `lower("HELLO")`, `"hello"`},
	{"regex", `regex("[a-z]+", "53453453.345345aaabbbccc23454")`, `"aaabbbccc"`},
	{"regexall", `regexall("[a-z]+", "1234abcd5678efgh9")`, `["abcd","efgh"]`},
	{"replace", `replace("1 + 2 + 3", "+", "-")`, `"1 - 2 - 3"`},
	{"replace", `replace("hello world", "/w.*d/", "everybody")`, `"hello everybody"`},
	{"split", `split(",", "foo,bar,baz")`, `["foo","bar","baz"]`},
	{"startswith", `startswith("hello world", "hello")`, `true`},
	{"strcontains", `strcontains("hello world", "wor")`, `true`},
	{"strrev", `strrev("hello")`, `"olleh"`},
	{"substr", `substr("hello world", 1, 4)`, `"ello"`},
	{"title", `title("hello world")`, `"Hello World"`},
	{"trim", `trim("?!hello?!", "!?")`, `"hello"`},
	{"trimprefix", `trimprefix("helloworld", "hello")`, `"world"`},
	{"trimspace", `trimspace("  hello\n\n")`, `"hello"`},
	{"trimsuffix", `trimsuffix("helloworld", "world")`, `"hello"`},
	{"upper", `upper("hello")`, `"HELLO"`},
	{"alltrue", `alltrue([true, true])`, `true`},
	{"anytrue", `anytrue([false, true])`, `true`},
	{"chunklist", `chunklist(["a", "b", "c", "d", "e"], 2)`, `[["a","b"],["c","d"],["e"]]`},
	{"coalesce", `coalesce("", "b", "c")`, `"b"`},
	{"coalescelist", `coalescelist([], ["c", "d"])`, `["c","d"]`},
	{"compact", `compact(["a", "", "b", "c"])`, `["a","b","c"]`},
	{"concat", `concat(["a", ""], ["b", "c"])`, `["a","","b","c"]`},
	{"contains", `contains(["a", "b", "c"], "a")`, `true`},
	{"distinct", `distinct(["a", "b", "a", "c", "d", "b"])`, `["a","b","c","d"]`},
	{"element", `element(["a", "b", "c"], 3)`, `"a"`},
	{"flatten", `flatten([["a", "b"], [], ["c"]])`, `["a","b","c"]`},
	{"index", `index(["a", "b", "c"], "b")`, `1`},
	{"keys", `keys({a = 1, c = 2, d = 3})`, `["a","c","d"]`},
	{"length", `length("hello")`, `5`},
	{"length", `length({a = "b"})`, `1`},
	{"lookup", `lookup({a = "ay", b = "bee"}, "c", "what?")`, `"what?"`},
	{"lookup", `lookup({a = "ay", b = "bee"}, "b")`, `"bee"`},
	{"matchkeys", `matchkeys(["i-123", "i-abc", "i-def"], ["us-west", "us-east", "us-east"], ["us-east"])`, `["i-abc","i-def"]`},
	{"merge", `merge({a = "b", c = "d"}, {e = "f", c = "z"})`, `{"a":"b","c":"z","e":"f"}`},
	{"one", `one(["hello"])`, `"hello"`},
	{"range", `range(1, 4)`, `[1,2,3]`},
	{"reverse", `reverse([1, 2, 3])`, `[3,2,1]`},
	{"setintersection", `setintersection(["a", "b"], ["b", "c"], ["b", "d"])`, `["b"]`},
	{"setproduct", `setproduct(["development", "staging"], ["app1", "app2"])`, `[["development","app1"],["development","app2"],["staging","app1"],["staging","app2"]]`},
	{"setsubtract", `setsubtract(["a", "b", "c"], ["a", "c"])`, `["b"]`},
	{"setunion", `setunion(["a", "b"], ["b", "c"], ["d"])`, `["a","b","c","d"]`},
	{"slice", `slice(["a", "b", "c", "d"], 1, 3)`, `["b","c"]`},
	{"sort", `sort(["e", "d", "a", "x"])`, `["a","d","e","x"]`},
	{"transpose", `transpose({a = ["1", "2"], b = ["2", "3"]})`, `{"1":["a"],"2":["a","b"],"3":["b"]}`},
	{"values", `values({a = 3, c = 2, d = 1})`, `[3,2,1]`},
	{"zipmap", `zipmap(["a", "b"], [1, 2])`, `{"a":1,"b":2}`},
	{"base64decode", `base64decode("SGVsbG8gV29ybGQ=")`, `"Hello World"`},
	{"base64encode", `base64encode("Hello World")`, `"SGVsbG8gV29ybGQ="`},
	{"base64gzip", `length(base64gzip("hello")) > 0`, `true`},
	{"base64gunzip", `base64gunzip(base64gzip("hello"))`, `"hello"`},
	{"ephemeralasnull", `ephemeralasnull("x")`, `"x"`},
	{"templatestring", `templatestring(local.tpl, {name = "lava", items = ["a", "b"]})`, `"hi lava: a,b,"`},
	{"core::upper", `core::upper("namespaced")`, `"NAMESPACED"`},
	{"csvdecode", `csvdecode("a,b\n1,2\n")`, `[{"a":"1","b":"2"}]`},
	{"jsondecode", `jsondecode("{\"hello\": \"world\"}")`, `{"hello":"world"}`},
	{"jsonencode", `jsonencode({hello = "world", n = [1, true]})`, `"{\"hello\":\"world\",\"n\":[1,true]}"`},
	{"textdecodebase64", `textdecodebase64("SABlAGwAbABvACAAVwBvAHIAbABkAA==", "UTF-16LE")`, `"Hello World"`},
	{"textencodebase64", `textencodebase64("Hello World", "UTF-16LE")`, `"SABlAGwAbABvACAAVwBvAHIAbABkAA=="`},
	{"urlencode", `urlencode("Hello World!")`, `"Hello+World%21"`},
	{"urldecode", `urldecode("Hello+World%21")`, `"Hello World!"`},
	{"yamldecode", `yamldecode("hello: world\nk: [1, 2]")`, `{"hello":"world","k":[1,2]}`},
	{"yamlencode", `yamlencode({a = "b", c = [1]})`, `"\"a\": \"b\"\n\"c\":\n- 1\n"`},
	{"formatdate", `formatdate("DD MMM YYYY hh:mm ZZZ", "2018-01-02T23:12:01Z")`, `"02 Jan 2018 23:12 UTC"`},
	{"timeadd", `timeadd("2017-11-22T00:00:00Z", "10m")`, `"2017-11-22T00:10:00Z"`},
	{"timecmp", `timecmp("2017-11-22T00:00:00Z", "2017-11-22T00:10:00Z")`, `-1`},
	{"timestamp", `length(timestamp()) == 20`, `true`},
	{"plantimestamp", `length(plantimestamp()) >= 20`, `true`},
	{"base64sha256", `base64sha256("hello world")`, `"uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek="`},
	{"base64sha512", `base64sha512("hello world")`, `"MJ7MSJwS1utMxA9QyQLytNDtd+5RGnx6m808qG1M2G+YndNbxf9JlnDaNCVbRbDP2DDoH2Bdz33FVC6TrpzXbw=="`},
	{"md5", `md5("hello world")`, `"5eb63bbbe01eeed093cb22bb8f5acdc3"`},
	{"sha1", `sha1("hello world")`, `"2aae6c35c94fcfb415dbe95f408b9ce91ee846ed"`},
	{"sha256", `sha256("hello world")`, `"b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"`},
	{"sha512", `sha512("hello world")`, `"309ecc489c12d6eb4cc40f50c902f2b4d0ed77ee511a7c7a9bcd3ca86d4cd86f989dd35bc5ff499670da34255b45b0cfd830e81f605dcf7dc5542e93ae9cd76f"`},
	{"bcrypt", `length(bcrypt("hello world", 4))`, `60`},
	{"uuid", `length(uuid())`, `36`},
	{"rsadecrypt", `rsadecrypt("mYG5W2trPSPmm9ZJoQAuKPFl3Q4fKK8FnqSz9XxpqfEEIROJA6vmvK1hV31s9DMdwv7LEMve4djKafwccoI8LhV6s/7yp3AydkM8KCN8DuJyHnxi2QKR4RSLgwvBddZgJOxuFMFf7JMQFV3TBRJPUc1RIxzs7KIAu1YGLK7ofGo=", local.test_rsa_key)`, `"secret"`},
	{"uuidv5", `uuidv5("dns", "www.terraform.io")`, `"a5008fae-b28c-5ba5-96cd-82b4c53552d6"`},
	{"cidrcontains", `cidrcontains("192.168.2.0/24", "192.168.2.1")`, `true`},
	{"cidrhost", `cidrhost("10.12.112.0/20", 16)`, `"10.12.112.16"`},
	{"cidrhost", `cidrhost("fd00:fd12:3456:7890::/56", 268)`, `"fd00:fd12:3456:7800::10c"`},
	{"cidrhost", `cidrhost("10.12.112.0/20", -1)`, `"10.12.127.255"`},
	{"cidrnetmask", `cidrnetmask("172.16.0.0/12")`, `"255.240.0.0"`},
	{"cidrsubnet", `cidrsubnet("172.16.0.0/12", 4, 2)`, `"172.18.0.0/16"`},
	{"cidrsubnet", `cidrsubnet("fd00:fd12:3456:7890::/56", 16, 162)`, `"fd00:fd12:3456:7800:a200::/72"`},
	{"cidrsubnets", `cidrsubnets("10.1.0.0/16", 4, 4, 8, 4)`, `["10.1.0.0/20","10.1.16.0/20","10.1.32.0/24","10.1.48.0/20"]`},
	{"can", `can(regex("^[a-z]+$", "ABC"))`, `false`},
	{"try", `try(tonumber("x"), "fallback")`, `"fallback"`},
	{"tobool", `tobool("true")`, `true`},
	{"tolist", `tolist(["a", "b"])`, `["a","b"]`},
	{"tomap", `tomap({a = 1, b = 2})`, `{"a":1,"b":2}`},
	{"tonumber", `tonumber("42")`, `42`},
	{"toset", `toset(["c", "b", "b"])`, `["b","c"]`},
	{"tostring", `tostring(5)`, `"5"`},
	{"sensitive", `nonsensitive(sensitive("x"))`, `"x"`},
	{"nonsensitive", `nonsensitive(sensitive(1)) + 1`, `2`},
	{"issensitive", `issensitive(sensitive("x"))`, `true`},
}

// expressionCases are the language beyond function calls: operators, conditionals, for
// expressions, splats, template directives and escapes, references.
var expressionCases = []functionCase{
	{"operators", `1 + 2 * 3 - 4 / 2 % 3`, `5`},
	{"comparison", `5 > 3 && !(2 == 3) || false`, `true`},
	{"conditional", `length("ab") > 1 ? "long" : "short"`, `"long"`},
	{"for list", `[for s in ["a", "b"] : upper(s)]`, `["A","B"]`},
	{"for map", `{for k, v in {a = 1, b = 2} : v => k if v > 1}`, `{"2":"b"}`},
	{"splat", `[{n = 1}, {n = 2}][*].n`, `[1,2]`},
	{"brace in string", `"}" == "}" ? "a}b" : "x"`, `"a}b"`},
	{"var", `var.region`, `"eu-west-1"`},
	{"var typed", `var.sizes["b"] + 1`, `3`},
	{"local", `local.greeting`, `"hello, eu-west-1"`},
	{"path", `path.module`, `"."`},
	{"workspace", `terraform.workspace`, `"default"`},
}

// functionDoc is a configuration with one output per case (o000, o001, ...) and the
// variables and locals the expression cases use. Templates, a directive and an escape are
// outputs of their own (template_*).
func functionDoc(cases []functionCase) string {
	outs := map[string]any{
		"template_directive": map[string]any{"value": `%{ for s in ["a", "b"] }[${s}]%{ endfor }%{ if true }!%{ endif }`},
		"template_escape":    map[string]any{"value": `$${not.a.reference} %%{literal}`},
		"template_mixed":     map[string]any{"value": `x-${upper("y")}-${1 + 1}`},
	}
	for i, c := range cases {
		outs[fmt.Sprintf("o%03d", i)] = map[string]any{"value": "${" + c.expr + "}"}
	}
	doc := map[string]any{
		"variable": map[string]any{
			"region": map[string]any{"type": "string", "default": "eu-west-1"},
			"sizes":  map[string]any{"type": "map(number)", "default": map[string]any{"a": 1, "b": 2}},
		},
		"locals": map[string]any{"greeting": "hello, ${var.region}", "test_rsa_key": testRSAKey,
			"tpl": "hi $${name}: %%{ for i in items }$${i},%%{ endfor }"},
		"output": outs,
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

// templateWants are the template outputs' values.
var templateWants = map[string]string{
	"template_directive": `"[a][b]!"`,
	"template_escape":    `"${not.a.reference} %{literal}"`,
	"template_mixed":     `"x-Y-2"`,
}

func allCases() []functionCase {
	return append(append([]functionCase{}, functionCases...), expressionCases...)
}

// TestFunctions evaluates every function case and expression case through the embedded engine
// (plan and apply of outputs) and compares with the value OpenTofu gives.
func TestFunctions(t *testing.T) {
	t.Parallel()
	cases := allCases()
	h := newMemHarness(t, t.TempDir())
	if _, err := h.apply(t, functionDoc(cases), nil); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		got := string(h.state.Outputs[fmt.Sprintf("o%03d", i)].Value)
		if !jsonEqual([]byte(got), []byte(c.want)) {
			t.Errorf("%s: %s = %s, want %s", c.fn, c.expr, got, c.want)
		}
	}
	for name, want := range templateWants {
		if got := string(h.state.Outputs[name].Value); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
}

// TestFunctions_coverage checks every function the engine offers has a case, and every case
// names a function the engine offers.
func TestFunctions_coverage(t *testing.T) {
	t.Parallel()
	have := map[string]bool{}
	for _, c := range functionCases {
		have[c.fn] = true
	}
	refused := map[string]bool{}
	for _, n := range FilesystemFunctions {
		refused[n] = true
	}
	var missing []string
	for name := range Functions() {
		if !have[name] && !refused[name] && !strings.HasPrefix(name, "core::") {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("functions without a case: %s", strings.Join(missing, " "))
	}
	fs := Functions()
	for name := range have {
		if _, ok := fs[name]; !ok {
			t.Errorf("case for %s, which the engine does not offer", name)
		}
	}
}

// testRSAKey is a throwaway 1024-bit RSA key made for the rsadecrypt case (openssl genrsa).
const testRSAKey = `-----BEGIN RSA PRIVATE KEY-----
MIICXgIBAAKBgQC0ZFNyxhisUeJ4Hl/V9G+Ok1Smfq0ze4ftw+4PO+eNuMviHfaA
afT2jGLK2TFggG0J8EyCXwcciCoXF4ye8XRttcmDfxIgrlOP8M3TVMmFPMkggd94
daXcbecFeO7O8faG+hScEJI2piyYu5d6iiOFkrASWG4XaR7PPAYqJc4dVQIDAQAB
AoGBAIBfPPtaech3ZUCx7OVnU9QUiJMLZtpSOIM9gTYaHUg/j+fUBs2PmaGyecN9
GKRiADaoaOoGEht90uYn/gxGK+GLnNH7QFzyZR5fgjrv/KJZtDOddIDOqr+fcV0N
1TOj2LgOBQpRbw+sWE9Vxsa08I+fTsysT4MCUyTZvx6QydBpAkEA7gvkayG8pbC7
7W2mnp0J3UuVKXttOhEOk6KyrzqVIMm0PFUKvapn0iyE0VT+P6lwRoR5XOnfedfL
qe0HZovyTwJBAMH/Qxo0puXKfPPtE7le6e6s+UhXDiWBsISTq7+aSY3VQDjzSLNc
9f2TIdW9qz8COz0jjPotFqZWa7zY7DVCwRsCQQDnHbq23Pl4cP/0hApKYzOpnHGE
5eXlg5wAcO1FPf595/fKv9J+1QyZvUlyqC91hb+RZ5shP5wOgxqkr5II2QT3AkAX
3Uzl5mA5mGUypJFulkx0vfaUfZER8BhE1t2j3lj6B6e02cixt9fS78yTvJdaUu3y
oXLwO6ezoqHyQ0UbcDDNAkEAiqoGzVSK6gv/+FQyFhPnasT9JCbXWmUzrLbWTNXd
cLY9JMGG2+2nQ9K8TDP0jBIMW1Jowie8iuH7AwircZZ1ZQ==
-----END RSA PRIVATE KEY-----
`

// TestBudget_functions: an operation's function table has plantimestamp at the operation's
// start, is built once per operation, and leaves the shared table's own.
func TestBudget_functions(t *testing.T) {
	t.Parallel()
	b := newBudget(t.Context())
	b.now = time.Date(2026, 12, 3, 10, 0, 0, 100, time.UTC)
	a := b.functions()
	if reflect.ValueOf(a).Pointer() != reflect.ValueOf(b.functions()).Pointer() {
		t.Error("one operation got two tables")
	}
	ts := func(funcs map[string]function.Function) string {
		v, err := funcs["plantimestamp"].Call(nil)
		if err != nil {
			t.Fatal(err)
		}
		return v.AsString()
	}
	if got := ts(a); got != "2026-12-03T10:00:00Z" {
		t.Errorf("plantimestamp = %s", got)
	}
	if got := ts(sharedFunctions()); got == "2026-12-03T10:00:00Z" {
		t.Errorf("the shared table's plantimestamp became an operation's: %s", got)
	}
}

// TestFunctions_declaredSignatures: the engine offers exactly the functions of the language
// layer's table (functions.Builtin), each under its name and under core:: once, with the
// declared signature, so what synthesis accepts is what the engine can call, the refused
// filesystem functions included.
func TestFunctions_declaredSignatures(t *testing.T) {
	t.Parallel()
	fs := Functions()
	declared := functions.Builtin()
	for name, sig := range declared {
		for _, n := range []string{name, functions.CorePrefix + name} {
			f, ok := fs[n]
			if !ok {
				t.Errorf("%s is declared (%s argument(s)) but the engine has no such function", n, sig)
				continue
			}
			if got := (functions.Signature{Params: len(f.Params()), Variadic: f.VarParam() != nil}); got != sig {
				t.Errorf("%s takes %s argument(s) in the engine, %s in the declared table", n, got, sig)
			}
		}
	}
	for n := range fs {
		if _, ok := declared[strings.TrimPrefix(n, functions.CorePrefix)]; !ok || strings.HasPrefix(n, functions.CorePrefix+functions.CorePrefix) {
			t.Errorf("the engine offers %s, which the declared table does not have", n)
		}
	}
}
