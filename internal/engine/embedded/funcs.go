package embedded

import (
	"bytes"
	"compress/gzip"
	"crypto/md5" //nolint:gosec // md5() is a Terraform function; not used for security here.
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // sha1() is a Terraform function.
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/big"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	ctyyaml "github.com/zclconf/go-cty-yaml"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/text/encoding/ianaindex"

	"github.com/lava-operator/lava/internal/lang/functions"
	"github.com/lava-operator/lava/internal/lang/hclnest"
)

// FilesystemFunctions are OpenTofu's functions that read the filesystem: the embedded engine
// refuses them (a rendered architecture must not read the operator's disk), as the tenant
// policy does before plan.
var FilesystemFunctions = []string{"abspath", "basename", "dirname", "file", "filebase64", "filebase64sha256",
	"filebase64sha512", "fileexists", "filemd5", "fileset", "filesha1", "filesha256", "filesha512", "pathexpand", "templatefile"}

var (
	funcsOnce sync.Once
	funcsBase map[string]function.Function
)

// sharedFunctions is [Functions] built once, for evaluation contexts (read only).
func sharedFunctions() map[string]function.Function {
	funcsOnce.Do(func() { funcsBase = Functions() })
	return funcsBase
}

// Functions returns the functions expressions may call: OpenTofu's documented functions that
// have no filesystem or network effect, from go-cty's function/stdlib, hcl/v2's ext/tryfunc,
// go-cty-yaml and small wrappers over the Go standard library where those lack one (cidr*,
// hashes, base64, uuid). The filesystem functions ([FilesystemFunctions]) are present and
// fail with a clear error. The names, each also under core::, and their signatures are those
// of [functions.Builtin], the table synthesis checks calls against (a test keeps the two
// equal). Each call returns a fresh map.
func Functions() map[string]function.Function {
	fs := map[string]function.Function{
		// Numeric.
		"abs": stdlib.AbsoluteFunc, "ceil": stdlib.CeilFunc, "floor": stdlib.FloorFunc, "log": stdlib.LogFunc,
		"max": stdlib.MaxFunc, "min": stdlib.MinFunc, "parseint": stdlib.ParseIntFunc, "pow": stdlib.PowFunc,
		"signum": stdlib.SignumFunc, "sum": sumFunc,
		// Strings.
		"chomp": stdlib.ChompFunc, "endswith": endsWithFunc, "format": stdlib.FormatFunc, "formatlist": stdlib.FormatListFunc,
		"indent": stdlib.IndentFunc, "join": stdlib.JoinFunc, "lower": stdlib.LowerFunc, "regex": stdlib.RegexFunc,
		"regexall": stdlib.RegexAllFunc, "replace": replaceFunc, "split": stdlib.SplitFunc, "startswith": startsWithFunc,
		"strcontains": strContainsFunc, "strrev": stdlib.ReverseFunc, "substr": stdlib.SubstrFunc, "title": stdlib.TitleFunc,
		"trim": stdlib.TrimFunc, "trimprefix": stdlib.TrimPrefixFunc, "trimspace": stdlib.TrimSpaceFunc,
		"trimsuffix": stdlib.TrimSuffixFunc, "upper": stdlib.UpperFunc,
		// Collections.
		"alltrue": allTrueFunc, "anytrue": anyTrueFunc, "chunklist": stdlib.ChunklistFunc, "coalesce": coalesceFunc,
		"coalescelist": stdlib.CoalesceListFunc, "compact": stdlib.CompactFunc, "concat": stdlib.ConcatFunc,
		"contains": stdlib.ContainsFunc, "distinct": stdlib.DistinctFunc, "element": stdlib.ElementFunc,
		"flatten": stdlib.FlattenFunc, "index": indexFunc, "keys": stdlib.KeysFunc, "length": lengthFunc,
		"lookup": lookupFunc, "matchkeys": matchKeysFunc, "merge": stdlib.MergeFunc, "one": oneFunc,
		"range": stdlib.RangeFunc, "reverse": stdlib.ReverseListFunc, "setintersection": stdlib.SetIntersectionFunc,
		"setproduct": stdlib.SetProductFunc, "setsubtract": stdlib.SetSubtractFunc, "setunion": stdlib.SetUnionFunc,
		"slice": stdlib.SliceFunc, "sort": stdlib.SortFunc, "transpose": transposeFunc, "values": stdlib.ValuesFunc,
		"zipmap": stdlib.ZipmapFunc,
		// Encoding.
		"base64decode": base64DecodeFunc, "base64gunzip": base64GunzipFunc, "base64encode": base64EncodeFunc, "base64gzip": base64GzipFunc,
		"csvdecode": stdlib.CSVDecodeFunc, "jsondecode": stdlib.JSONDecodeFunc, "jsonencode": stdlib.JSONEncodeFunc,
		"textdecodebase64": textDecodeBase64Func, "textencodebase64": textEncodeBase64Func,
		"urlencode": urlEncodeFunc, "urldecode": urlDecodeFunc,
		"yamldecode": ctyyaml.YAMLDecodeFunc, "yamlencode": ctyyaml.YAMLEncodeFunc,
		// Date and time.
		"formatdate": stdlib.FormatDateFunc, "timeadd": stdlib.TimeAddFunc, "timecmp": timeCmpFunc,
		"timestamp": timestampFunc, "plantimestamp": planTimestampFunc(time.Now().UTC()),
		// Hash and crypto.
		"base64sha256": hashFunc(sha256.New, base64.StdEncoding.EncodeToString),
		"base64sha512": hashFunc(sha512.New, base64.StdEncoding.EncodeToString),
		"md5":          hashFunc(md5.New, hex.EncodeToString), "sha1": hashFunc(sha1.New, hex.EncodeToString),
		"sha256": hashFunc(sha256.New, hex.EncodeToString), "sha512": hashFunc(sha512.New, hex.EncodeToString),
		"bcrypt": bcryptFunc, "rsadecrypt": rsaDecryptFunc, "uuid": uuidFunc, "uuidv5": uuidV5Func,
		// IP networks.
		"cidrcontains": cidrContainsFunc, "cidrhost": cidrHostFunc, "cidrnetmask": cidrNetmaskFunc,
		"cidrsubnet": cidrSubnetFunc, "cidrsubnets": cidrSubnetsFunc,
		// Type conversion.
		"can": tryfunc.CanFunc, "try": tryfunc.TryFunc,
		"tobool": stdlib.MakeToFunc(cty.Bool), "tolist": stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap": stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)), "tonumber": stdlib.MakeToFunc(cty.Number),
		"toset": stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)), "tostring": stdlib.MakeToFunc(cty.String),
		"sensitive": sensitiveFunc, "nonsensitive": nonsensitiveFunc, "issensitive": isSensitiveFunc,
		// The embedded engine has no ephemeral values: every value passes through.
		"ephemeralasnull": identityFunc,
	}
	for name, f := range fs {
		fs[name] = hideSensitiveErrors(f)
	}
	for _, name := range FilesystemFunctions {
		fs[name] = refusedFunc(name, "it reads the filesystem of the process running the engine")
	}
	fs["templatestring"] = templateStringFunc(sync.OnceValue(func() map[string]function.Function { return withoutTemplateString(fs) }))
	// OpenTofu also names every built-in function in the core:: namespace, once (core::core::abs
	// is unknown to it).
	for name := range functions.Builtin() {
		if f, ok := fs[name]; ok {
			fs[functions.CorePrefix+name] = f
		}
	}
	return fs
}

// hideSensitiveErrors returns f whose error never shows the value of a sensitive argument
// (sensitive(), a sensitive variable or attribute, and everything computed from one): when an
// argument holds a sensitive value and f fails, the error is "the argument is sensitive, so
// this error does not show it" on the first such argument. go-cty's functions print the
// values they refuse (tonumber: `cannot convert "VALUE" to number`), which would put a value
// derived from a Secret binding into a Failed condition; OpenTofu words its conversion errors
// the same way ("cannot convert this sensitive string to number"). Otherwise f is unchanged:
// types, unknown results and marks are f's own. A function that takes marked arguments itself
// (sensitive, nonsensitive, issensitive) is returned as is.
func hideSensitiveErrors(f function.Function) function.Function {
	params := f.Params()
	ps := make([]function.Parameter, len(params))
	for i, p := range params {
		if p.AllowMarked {
			return f
		}
		p.AllowMarked, p.AllowUnknown, p.AllowNull, p.AllowDynamicType = true, true, true, true
		ps[i] = p
	}
	var vp *function.Parameter
	if v := f.VarParam(); v != nil {
		if v.AllowMarked {
			return f
		}
		c := *v
		c.AllowMarked, c.AllowUnknown, c.AllowNull, c.AllowDynamicType = true, true, true, true
		vp = &c
	}
	hide := func(args []cty.Value, err error) error {
		if le := (*LimitError)(nil); errors.As(err, &le) {
			return err // sizes only, never a value
		}
		for i, a := range args {
			if hasMarkDeep(a, sensitiveMark) || hasMarkDeep(a, attributeSensitiveMark) {
				return function.NewArgErrorf(i, "the argument is sensitive, so this error does not show it")
			}
		}
		return err
	}
	return function.New(&function.Spec{
		Description: f.Description(),
		Params:      ps,
		VarParam:    vp,
		Type: func(args []cty.Value) (cty.Type, error) {
			ty, err := f.ReturnTypeForValues(args)
			if err != nil {
				return ty, hide(args, err)
			}
			return ty, nil
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			v, err := f.Call(args)
			if err != nil {
				return v, hide(args, err)
			}
			return v, nil
		},
	})
}

var identityFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowUnknown: true, AllowNull: true, AllowMarked: true, AllowDynamicType: true}},
	Type:   func(args []cty.Value) (cty.Type, error) { return args[0].Type(), nil },
	Impl:   func(args []cty.Value, _ cty.Type) (cty.Value, error) { return args[0], nil },
})

// templateStringFunc renders a template held in a string with the given variables (hcl/v2
// template syntax), with the functions of table (read on the first call), under the same
// evaluation limits as the configuration's own templates (instrument).
func templateStringFunc(table func() map[string]function.Function) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "template", Type: cty.String}, {Name: "vars", Type: cty.DynamicPseudoType}},
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			vars := args[1]
			if !vars.Type().IsObjectType() && !vars.Type().IsMapType() {
				return cty.NilVal, function.NewArgErrorf(1, "invalid vars value: must be a map")
			}
			tpl, diags := hclnest.ParseTemplate([]byte(args[0].AsString()), "<templatestring argument>", hcl.InitialPos)
			if diags.HasErrors() {
				return cty.NilVal, function.NewArgError(0, diags)
			}
			ctx := &hcl.EvalContext{Variables: vars.AsValueMap(), Functions: table()}
			v, diags := instrument(tpl).Value(ctx)
			if diags.HasErrors() {
				return cty.NilVal, diags
			}
			return convert.Convert(v, cty.String)
		},
	})
}

// withoutTemplateString is funcs without templatestring (under any name): a template held in
// a string cannot render another one, so a string that renders itself does not recurse.
func withoutTemplateString(funcs map[string]function.Function) map[string]function.Function {
	out := make(map[string]function.Function, len(funcs))
	for k, v := range funcs {
		if k != "templatestring" && k != "core::templatestring" {
			out[k] = v
		}
	}
	return out
}

// refusedFunc fails every call with the reason. It takes the arguments OpenTofu's function of
// that name takes ([functions.Lookup]), so a wrong count is reported as for any function.
func refusedFunc(name, why string) function.Function {
	arg := function.Parameter{Type: cty.DynamicPseudoType, AllowUnknown: true, AllowNull: true, AllowDynamicType: true, AllowMarked: true}
	sig, _ := functions.Lookup(name)
	params := make([]function.Parameter, sig.Params)
	for i := range params {
		params[i] = arg
		params[i].Name = fmt.Sprintf("arg%d", i+1)
	}
	var vp *function.Parameter
	if sig.Variadic {
		vp = &arg
		vp.Name = "args"
	}
	return function.New(&function.Spec{
		Description: name + " is refused by the embedded engine",
		Params:      params,
		VarParam:    vp,
		Type: func([]cty.Value) (cty.Type, error) {
			return cty.NilType, fmt.Errorf("%s is refused by the embedded engine: %s", name, why)
		},
	})
}

func str1(name string, impl func(s string) (cty.Value, error), ret cty.Type) function.Function {
	return function.New(&function.Spec{
		Params:       []function.Parameter{{Name: name, Type: cty.String}},
		Type:         function.StaticReturnType(ret),
		RefineResult: refineNotNull,
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return impl(args[0].AsString())
		},
	})
}

func refineNotNull(b *cty.RefinementBuilder) *cty.RefinementBuilder { return b.NotNull() }

func str2(a, b string, impl func(x, y string) (cty.Value, error), ret cty.Type) function.Function {
	return function.New(&function.Spec{
		Params:       []function.Parameter{{Name: a, Type: cty.String}, {Name: b, Type: cty.String}},
		Type:         function.StaticReturnType(ret),
		RefineResult: refineNotNull,
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return impl(args[0].AsString(), args[1].AsString())
		},
	})
}

var (
	startsWithFunc  = str2("str", "prefix", func(s, p string) (cty.Value, error) { return cty.BoolVal(strings.HasPrefix(s, p)), nil }, cty.Bool)
	endsWithFunc    = str2("str", "suffix", func(s, p string) (cty.Value, error) { return cty.BoolVal(strings.HasSuffix(s, p)), nil }, cty.Bool)
	strContainsFunc = str2("str", "substr", func(s, p string) (cty.Value, error) { return cty.BoolVal(strings.Contains(s, p)), nil }, cty.Bool)

	base64EncodeFunc = str1("str", func(s string) (cty.Value, error) {
		return cty.StringVal(base64.StdEncoding.EncodeToString([]byte(s))), nil
	}, cty.String)
	base64DecodeFunc = str1("str", func(s string) (cty.Value, error) {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return cty.NilVal, fmt.Errorf("failed to decode base64 data: %w", err)
		}
		if !utf8.Valid(b) {
			return cty.NilVal, errors.New("the result of decoding the provided string is not valid UTF-8")
		}
		return cty.StringVal(string(b)), nil
	}, cty.String)
	base64GunzipFunc = str1("str", func(s string) (cty.Value, error) {
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return cty.NilVal, fmt.Errorf("failed to decode base64 data: %w", err)
		}
		r, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return cty.NilVal, fmt.Errorf("failed to gunzip: %w", err)
		}
		out, err := io.ReadAll(io.LimitReader(r, MaxValueBytes+1)) // more is refused (MaxValueBytes)
		if err != nil {
			return cty.NilVal, &workError{fmt.Errorf("failed to gunzip: %w", err), int64(len(out))}
		}
		if !utf8.Valid(out) {
			return cty.NilVal, &workError{errors.New("the result of decoding the provided string is not valid UTF-8"), int64(len(out))}
		}
		return cty.StringVal(string(out)), nil
	}, cty.String)
	base64GzipFunc = str1("str", func(s string) (cty.Value, error) {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		if _, err := w.Write([]byte(s)); err != nil {
			return cty.NilVal, err
		}
		if err := w.Close(); err != nil {
			return cty.NilVal, err
		}
		return cty.StringVal(base64.StdEncoding.EncodeToString(buf.Bytes())), nil
	}, cty.String)
	urlEncodeFunc = str1("str", func(s string) (cty.Value, error) { return cty.StringVal(url.QueryEscape(s)), nil }, cty.String)
	urlDecodeFunc = str1("str", func(s string) (cty.Value, error) {
		out, err := url.QueryUnescape(s)
		if err != nil {
			return cty.NilVal, err
		}
		return cty.StringVal(out), nil
	}, cty.String)
	textEncodeBase64Func = str2("string", "encoding", func(s, enc string) (cty.Value, error) {
		e, err := ianaindex.IANA.Encoding(enc)
		if err != nil || e == nil {
			return cty.NilVal, fmt.Errorf("%q is not a supported IANA encoding name or alias", enc)
		}
		b, err := e.NewEncoder().String(s)
		if err != nil {
			return cty.NilVal, fmt.Errorf("the given string contains characters that cannot be represented in %s", enc)
		}
		return cty.StringVal(base64.StdEncoding.EncodeToString([]byte(b))), nil
	}, cty.String)
	textDecodeBase64Func = str2("source", "encoding", func(s, enc string) (cty.Value, error) {
		e, err := ianaindex.IANA.Encoding(enc)
		if err != nil || e == nil {
			return cty.NilVal, fmt.Errorf("%q is not a supported IANA encoding name or alias", enc)
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return cty.NilVal, fmt.Errorf("the given value is not valid base64: %w", err)
		}
		out, err := e.NewDecoder().Bytes(raw)
		if err != nil {
			return cty.NilVal, fmt.Errorf("the given string is not valid in %s", enc)
		}
		return cty.StringVal(string(out)), nil
	}, cty.String)

	uuidFunc = function.New(&function.Spec{
		Type: function.StaticReturnType(cty.String),
		Impl: func([]cty.Value, cty.Type) (cty.Value, error) { return cty.StringVal(uuid.NewString()), nil },
	})
	uuidV5Func = str2("namespace", "name", func(ns, name string) (cty.Value, error) {
		var space uuid.UUID
		switch ns {
		case "dns":
			space = uuid.NameSpaceDNS
		case "url":
			space = uuid.NameSpaceURL
		case "oid":
			space = uuid.NameSpaceOID
		case "x500":
			space = uuid.NameSpaceX500
		default:
			var err error
			if space, err = uuid.Parse(ns); err != nil {
				return cty.NilVal, fmt.Errorf("uuidv5() doesn't support namespace %s (%w)", ns, err)
			}
		}
		return cty.StringVal(uuid.NewSHA1(space, []byte(name)).String()), nil
	}, cty.String)

	timestampFunc = function.New(&function.Spec{
		Type: function.StaticReturnType(cty.String),
		Impl: func([]cty.Value, cty.Type) (cty.Value, error) {
			return cty.StringVal(time.Now().UTC().Format(time.RFC3339)), nil
		},
	})
	timeCmpFunc = str2("timestamp_a", "timestamp_b", func(a, b string) (cty.Value, error) {
		ta, err := time.Parse(time.RFC3339, a)
		if err != nil {
			return cty.NilVal, function.NewArgError(0, err)
		}
		tb, err := time.Parse(time.RFC3339, b)
		if err != nil {
			return cty.NilVal, function.NewArgError(1, err)
		}
		return cty.NumberIntVal(int64(ta.Compare(tb))), nil
	}, cty.Number)

	bcryptFunc = function.New(&function.Spec{
		Params:   []function.Parameter{{Name: "str", Type: cty.String}},
		VarParam: &function.Parameter{Name: "cost", Type: cty.Number},
		Type:     function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			cost := 10
			if len(args) > 1 {
				c, _ := args[1].AsBigFloat().Int64()
				cost = int(c)
			}
			if len(args) > 2 {
				return cty.NilVal, errors.New("bcrypt() takes no more than two arguments")
			}
			if err := bcryptCost(int64(cost)); err != nil {
				return cty.NilVal, err
			}
			h, err := bcrypt.GenerateFromPassword([]byte(args[0].AsString()), cost)
			if err != nil {
				return cty.NilVal, fmt.Errorf("error occurred generating password %w", err)
			}
			return cty.StringVal(string(h)), nil
		},
	})
	rsaDecryptFunc = str2("ciphertext", "privatekey", func(ct, key string) (cty.Value, error) {
		b, err := base64.StdEncoding.DecodeString(ct)
		if err != nil {
			return cty.NilVal, function.NewArgErrorf(0, "failed to decode input %q: cipher text must be base64-encoded", ct)
		}
		blk, _ := pem.Decode([]byte(key))
		if blk == nil {
			return cty.NilVal, function.NewArgErrorf(1, "failed to parse key: no PEM block")
		}
		var priv *rsa.PrivateKey
		if k, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
			priv = k
		} else if k, err := x509.ParsePKCS8PrivateKey(blk.Bytes); err == nil {
			if rk, ok := k.(*rsa.PrivateKey); ok {
				priv = rk
			}
		}
		if priv == nil {
			return cty.NilVal, function.NewArgErrorf(1, "failed to parse key: not an RSA private key")
		}
		//lint:ignore SA1019 rsadecrypt is OpenTofu's function, defined as PKCS #1 v1.5 decryption (TestFunctions_tofuOracle compares).
		out, err := rsa.DecryptPKCS1v15(nil, priv, b)
		if err != nil {
			return cty.NilVal, fmt.Errorf("failed to decrypt: %w", err)
		}
		return cty.StringVal(string(out)), nil
	}, cty.String)
)

func planTimestampFunc(at time.Time) function.Function {
	return function.New(&function.Spec{
		Type: function.StaticReturnType(cty.String),
		Impl: func([]cty.Value, cty.Type) (cty.Value, error) { return cty.StringVal(at.Format(time.RFC3339)), nil },
	})
}

func hashFunc(h func() hash.Hash, enc func([]byte) string) function.Function {
	return str1("str", func(s string) (cty.Value, error) {
		x := h()
		x.Write([]byte(s))
		return cty.StringVal(enc(x.Sum(nil))), nil
	}, cty.String)
}

// replaceFunc is Terraform's replace: a substring wrapped in slashes is a regular expression.
var replaceFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}, {Name: "substr", Type: cty.String}, {Name: "replace", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		s, sub, rep := args[0].AsString(), args[1].AsString(), args[2].AsString()
		if len(sub) > 1 && sub[0] == '/' && sub[len(sub)-1] == '/' {
			re, err := regexp.Compile(sub[1 : len(sub)-1])
			if err != nil {
				return cty.NilVal, err
			}
			return cty.StringVal(re.ReplaceAllString(s, rep)), nil
		}
		return cty.StringVal(strings.ReplaceAll(s, sub, rep)), nil
	},
})

// coalesceFunc is Terraform's coalesce: the first argument that is neither null nor an
// empty string.
var coalesceFunc = function.New(&function.Spec{
	VarParam: &function.Parameter{Name: "vals", Type: cty.DynamicPseudoType, AllowUnknown: true, AllowDynamicType: true, AllowNull: true},
	Type: func(args []cty.Value) (cty.Type, error) {
		tys := make([]cty.Type, len(args))
		for i, a := range args {
			tys[i] = a.Type()
		}
		ty, convs := convert.UnifyUnsafe(tys)
		if ty == cty.NilType {
			return cty.NilType, errors.New("all arguments must have the same type")
		}
		for i, c := range convs {
			if c != nil {
				if _, err := c(args[i]); err != nil {
					return cty.NilType, err
				}
			}
		}
		return ty, nil
	},
	Impl: func(args []cty.Value, ret cty.Type) (cty.Value, error) {
		for _, a := range args {
			v, err := convert.Convert(a, ret)
			if err != nil {
				return cty.NilVal, err
			}
			if !v.IsKnown() {
				return cty.UnknownVal(ret), nil
			}
			if v.IsNull() || ret == cty.String && v.AsString() == "" {
				continue
			}
			return v, nil
		}
		return cty.NilVal, errors.New("no non-null, non-empty-string arguments")
	},
})

// lengthFunc is Terraform's length: strings (in grapheme clusters) and collections.
var lengthFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowDynamicType: true, AllowUnknown: true, AllowMarked: true}},
	Type: func(args []cty.Value) (cty.Type, error) {
		ty := args[0].Type()
		if ty == cty.String || ty == cty.DynamicPseudoType || ty.IsCollectionType() || ty.IsTupleType() || ty.IsObjectType() {
			return cty.Number, nil
		}
		return cty.Number, errors.New("argument must be a string, a collection type, or a structural type")
	},
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v, marks := args[0].Unmark()
		ty := v.Type()
		switch {
		case ty == cty.DynamicPseudoType:
			return cty.UnknownVal(cty.Number).WithMarks(marks), nil
		case ty.IsTupleType():
			return cty.NumberIntVal(int64(len(ty.TupleElementTypes()))).WithMarks(marks), nil
		case ty.IsObjectType():
			return cty.NumberIntVal(int64(len(ty.AttributeTypes()))).WithMarks(marks), nil
		case ty == cty.String:
			if !v.IsKnown() || v.IsNull() {
				if v.IsNull() {
					return cty.NilVal, errors.New("argument must not be null")
				}
				return cty.UnknownVal(cty.Number).WithMarks(marks), nil
			}
			n, err := stdlib.Strlen(v)
			return n.WithMarks(marks), err
		}
		if !v.IsKnown() {
			return cty.UnknownVal(cty.Number).WithMarks(marks), nil
		}
		if v.IsNull() {
			return cty.NilVal, errors.New("argument must not be null")
		}
		return v.Length().WithMarks(marks), nil
	},
})

// lookupFunc is Terraform's lookup(map, key, default...): the element of a map or the attribute
// of an object with the given key, else the default when one is given (at most one), else an
// error. go-cty's stdlib.LookupFunc requires the default.
var lookupFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "inputMap", Type: cty.DynamicPseudoType, AllowMarked: true},
		{Name: "key", Type: cty.String, AllowMarked: true}},
	VarParam: &function.Parameter{Name: "default", Type: cty.DynamicPseudoType, AllowUnknown: true,
		AllowDynamicType: true, AllowNull: true, AllowMarked: true},
	Type: func(args []cty.Value) (cty.Type, error) {
		if len(args) > 3 {
			return cty.NilType, errors.New("lookup() takes no more than three arguments")
		}
		ty := args[0].Type()
		switch {
		case ty.IsObjectType():
			if !args[1].IsKnown() {
				return cty.DynamicPseudoType, nil
			}
			k, _ := args[1].Unmark()
			key := k.AsString()
			switch {
			case ty.HasAttribute(key):
				return args[0].GetAttr(key).Type(), nil
			case len(args) == 3:
				return args[2].Type(), nil
			}
			return cty.DynamicPseudoType, function.NewArgErrorf(0, "the given object has no attribute %q", key)
		case ty.IsMapType():
			if len(args) == 3 {
				if _, err := convert.Convert(args[2], ty.ElementType()); err != nil {
					return cty.NilType, function.NewArgErrorf(2, "the default value must have the same type as the map elements")
				}
			}
			return ty.ElementType(), nil
		}
		return cty.NilType, function.NewArgErrorf(0, "lookup() requires a map as the first argument")
	},
	Impl: func(args []cty.Value, ret cty.Type) (cty.Value, error) {
		m, mapMarks := args[0].Unmark()
		k, keyMarks := args[1].Unmark()
		marks := []cty.ValueMarks{mapMarks, keyMarks}
		key := k.AsString()
		if !m.IsWhollyKnown() {
			return cty.UnknownVal(ret).WithMarks(marks...), nil
		}
		if m.Type().IsObjectType() {
			if m.Type().HasAttribute(key) {
				return m.GetAttr(key).WithMarks(marks...), nil
			}
		} else if m.HasIndex(cty.StringVal(key)) == cty.True {
			return m.Index(cty.StringVal(key)).WithMarks(marks...), nil
		}
		if len(args) == 3 {
			d, err := convert.Convert(args[2], ret)
			if err != nil {
				return cty.NilVal, err
			}
			return d.WithMarks(marks...), nil
		}
		// A sensitive key never reaches the message: [hideSensitiveErrors] replaces it.
		return cty.NilVal, fmt.Errorf("lookup failed to find key %s", key)
	},
})

// indexFunc is Terraform's index(list, value): the first position of value.
var indexFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}, {Name: "value", Type: cty.DynamicPseudoType}},
	Type:   function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		l := args[0]
		if !(l.Type().IsListType() || l.Type().IsTupleType()) {
			return cty.NilVal, errors.New("argument must be a list or tuple")
		}
		if !l.IsKnown() {
			return cty.UnknownVal(cty.Number), nil
		}
		if l.LengthInt() == 0 {
			return cty.NilVal, errors.New("cannot search an empty list")
		}
		for it := l.ElementIterator(); it.Next(); {
			i, v := it.Element()
			eq, err := stdlib.Equal(v, args[1])
			if err != nil {
				return cty.NilVal, err
			}
			if !eq.IsKnown() {
				return cty.UnknownVal(cty.Number), nil
			}
			if eq.True() {
				return i, nil
			}
		}
		return cty.NilVal, errors.New("item not found")
	},
})

func boolReduce(all bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			result := all
			unknown := false
			for it := args[0].ElementIterator(); it.Next(); {
				_, v := it.Element()
				if !v.IsKnown() {
					unknown = true
					continue
				}
				if v.IsNull() {
					if all {
						return cty.False, nil
					}
					continue
				}
				if v.True() != all {
					return cty.BoolVal(!all), nil
				}
			}
			if unknown {
				return cty.UnknownVal(cty.Bool), nil
			}
			return cty.BoolVal(result), nil
		},
	})
}

var (
	allTrueFunc = boolReduce(true)
	anyTrueFunc = boolReduce(false)
)

// sumFunc adds the numbers of a list, set or tuple.
var sumFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}},
	Type:   function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		l := args[0]
		ty := l.Type()
		if !ty.IsListType() && !ty.IsSetType() && !ty.IsTupleType() {
			return cty.NilVal, function.NewArgErrorf(0, "argument must be list, set, or tuple. Received %s", ty.FriendlyName())
		}
		if !l.IsWhollyKnown() {
			return cty.UnknownVal(cty.Number), nil
		}
		if l.LengthInt() == 0 {
			return cty.NilVal, function.NewArgErrorf(0, "cannot sum an empty list")
		}
		total := cty.NumberIntVal(0)
		for it := l.ElementIterator(); it.Next(); {
			_, v := it.Element()
			if v.IsNull() {
				return cty.NilVal, function.NewArgErrorf(0, "argument must be list, set, or tuple of number values")
			}
			n, err := convert.Convert(v, cty.Number)
			if err != nil {
				return cty.NilVal, function.NewArgErrorf(0, "argument must be list, set, or tuple of number values")
			}
			total = total.Add(n)
		}
		return total, nil
	},
})

// oneFunc returns the element of a zero- or one-element collection (null for none).
var oneFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}},
	Type: func(args []cty.Value) (cty.Type, error) {
		ty := args[0].Type()
		switch {
		case ty.IsListType() || ty.IsSetType():
			return ty.ElementType(), nil
		case ty.IsTupleType():
			ets := ty.TupleElementTypes()
			switch len(ets) {
			case 0:
				return cty.DynamicPseudoType, nil
			case 1:
				return ets[0], nil
			}
			return cty.NilType, function.NewArgErrorf(0, "must be a list, set, or tuple value with either zero or one elements")
		}
		return cty.NilType, function.NewArgErrorf(0, "must be a list, set, or tuple value with either zero or one elements")
	},
	Impl: func(args []cty.Value, ret cty.Type) (cty.Value, error) {
		v := args[0]
		if !v.IsKnown() {
			return cty.UnknownVal(ret), nil
		}
		switch v.LengthInt() {
		case 0:
			return cty.NullVal(ret), nil
		case 1:
			it := v.ElementIterator()
			it.Next()
			_, e := it.Element()
			return e, nil
		}
		return cty.NilVal, function.NewArgErrorf(0, "must be a list, set, or tuple value with either zero or one elements")
	},
})

// matchKeysFunc keeps the values whose key (at the same index) is in searchset.
var matchKeysFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "values", Type: cty.List(cty.DynamicPseudoType)},
		{Name: "keys", Type: cty.List(cty.DynamicPseudoType)}, {Name: "searchset", Type: cty.List(cty.DynamicPseudoType)}},
	Type: func(args []cty.Value) (cty.Type, error) {
		ty, _ := convert.UnifyUnsafe([]cty.Type{args[1].Type(), args[2].Type()})
		if ty == cty.NilType {
			return cty.NilType, errors.New("keys and searchset must be of the same type")
		}
		return args[0].Type(), nil
	},
	Impl: func(args []cty.Value, ret cty.Type) (cty.Value, error) {
		if !args[0].IsKnown() {
			return cty.UnknownVal(cty.List(ret.ElementType())), nil
		}
		if args[0].LengthInt() != args[1].LengthInt() {
			return cty.ListValEmpty(ret.ElementType()), errors.New("length of keys and values should be equal")
		}
		var out []cty.Value
		i := 0
		for it := args[1].ElementIterator(); it.Next(); {
			_, key := it.Element()
			for s := args[2].ElementIterator(); s.Next(); {
				_, search := s.Element()
				eq, err := stdlib.Equal(key, search)
				if err != nil {
					return cty.NilVal, err
				}
				if !eq.IsKnown() {
					return cty.UnknownVal(ret), nil
				}
				if eq.True() {
					out = append(out, args[0].Index(cty.NumberIntVal(int64(i))))
					break
				}
			}
			i++
		}
		if len(out) == 0 {
			return cty.ListValEmpty(ret.ElementType()), nil
		}
		return cty.ListVal(out), nil
	},
})

// transposeFunc swaps the keys and values of a map of lists of strings.
var transposeFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "values", Type: cty.Map(cty.List(cty.String))}},
	Type:   function.StaticReturnType(cty.Map(cty.List(cty.String))),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		tmp := map[string][]string{}
		for it := args[0].ElementIterator(); it.Next(); {
			k, list := it.Element()
			if !list.IsKnown() {
				return cty.UnknownVal(cty.Map(cty.List(cty.String))), nil
			}
			for li := list.ElementIterator(); li.Next(); {
				_, v := li.Element()
				if v.IsNull() {
					return cty.NilVal, errors.New("lists must not contain null values")
				}
				tmp[v.AsString()] = append(tmp[v.AsString()], k.AsString())
			}
		}
		out := map[string]cty.Value{}
		for k, vs := range tmp {
			vals := make([]cty.Value, len(vs))
			for i, v := range vs {
				vals[i] = cty.StringVal(v)
			}
			out[k] = cty.ListVal(vals)
		}
		if len(out) == 0 {
			return cty.MapValEmpty(cty.List(cty.String)), nil
		}
		return cty.MapVal(out), nil
	},
})

var sensitiveFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowUnknown: true, AllowNull: true, AllowMarked: true, AllowDynamicType: true}},
	Type:   func(args []cty.Value) (cty.Type, error) { return args[0].Type(), nil },
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return args[0].Mark(sensitiveMark), nil
	},
})

var nonsensitiveFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowUnknown: true, AllowNull: true, AllowMarked: true, AllowDynamicType: true}},
	Type:   func(args []cty.Value) (cty.Type, error) { return args[0].Type(), nil },
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v, _ := args[0].Unmark()
		return v, nil
	},
})

var isSensitiveFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowUnknown: true, AllowNull: true, AllowMarked: true, AllowDynamicType: true}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.BoolVal(args[0].HasMark(sensitiveMark) || args[0].HasMark(attributeSensitiveMark)), nil
	},
})

// parsePrefix reads a CIDR prefix as Terraform does (host bits may be set).
func parsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR expression: %w", err)
	}
	return p.Masked(), nil
}

// addrInt and intAddr convert between an address and its integer value.
func addrInt(a netip.Addr) *big.Int { return new(big.Int).SetBytes(a.AsSlice()) }

func intAddr(n *big.Int, is4 bool) (netip.Addr, error) {
	size := 16
	if is4 {
		size = 4
	}
	if n.Sign() < 0 || n.BitLen() > size*8 {
		return netip.Addr{}, errors.New("address out of range")
	}
	b := make([]byte, size)
	n.FillBytes(b)
	a, _ := netip.AddrFromSlice(b)
	return a, nil
}

func numInt(v cty.Value) (*big.Int, error) {
	i, acc := v.AsBigFloat().Int(nil)
	if acc != big.Exact {
		return nil, errors.New("must be a whole number")
	}
	return i, nil
}

// hostNum is Terraform's cidrhost arithmetic: a negative number counts from the end.
func hostAddr(p netip.Prefix, num *big.Int) (netip.Addr, error) {
	hostBits := p.Addr().BitLen() - p.Bits()
	max := new(big.Int).Lsh(big.NewInt(1), uint(hostBits))
	n := new(big.Int).Set(num)
	if n.Sign() < 0 {
		n.Add(n, max)
	}
	if n.Sign() < 0 || n.Cmp(max) >= 0 {
		return netip.Addr{}, fmt.Errorf("prefix of %d does not accommodate a host numbered %s", p.Bits(), num.String())
	}
	return intAddr(n.Add(n, addrInt(p.Addr())), p.Addr().Is4())
}

func subnet(p netip.Prefix, newbits int, num *big.Int) (netip.Prefix, error) {
	bits := p.Bits() + newbits
	if newbits < 0 || bits > p.Addr().BitLen() {
		return netip.Prefix{}, fmt.Errorf("insufficient address space to extend prefix of %d by %d", p.Bits(), newbits)
	}
	max := new(big.Int).Lsh(big.NewInt(1), uint(newbits))
	if num.Sign() < 0 || num.Cmp(max) >= 0 {
		return netip.Prefix{}, fmt.Errorf("prefix extension of %d does not accommodate a subnet numbered %s", newbits, num.String())
	}
	shift := uint(p.Addr().BitLen() - bits)
	n := new(big.Int).Lsh(num, shift)
	a, err := intAddr(n.Or(n, addrInt(p.Addr())), p.Addr().Is4())
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, bits), nil
}

var cidrHostFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "prefix", Type: cty.String}, {Name: "hostnum", Type: cty.Number}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		p, err := parsePrefix(args[0].AsString())
		if err != nil {
			return cty.NilVal, err
		}
		n, err := numInt(args[1])
		if err != nil {
			return cty.NilVal, err
		}
		a, err := hostAddr(p, n)
		if err != nil {
			return cty.NilVal, err
		}
		return cty.StringVal(a.String()), nil
	},
})

var cidrNetmaskFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "prefix", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		p, err := parsePrefix(args[0].AsString())
		if err != nil {
			return cty.NilVal, err
		}
		if !p.Addr().Is4() {
			return cty.NilVal, errors.New("only IPv4 networks are supported")
		}
		mask := new(big.Int).Lsh(new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(p.Bits())), big.NewInt(1)), uint(32-p.Bits()))
		a, _ := intAddr(mask, true)
		return cty.StringVal(a.String()), nil
	},
})

var cidrSubnetFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "prefix", Type: cty.String}, {Name: "newbits", Type: cty.Number}, {Name: "netnum", Type: cty.Number}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		p, err := parsePrefix(args[0].AsString())
		if err != nil {
			return cty.NilVal, err
		}
		nb, err := numInt(args[1])
		if err != nil {
			return cty.NilVal, err
		}
		num, err := numInt(args[2])
		if err != nil {
			return cty.NilVal, err
		}
		s, err := subnet(p, int(nb.Int64()), num)
		if err != nil {
			return cty.NilVal, err
		}
		return cty.StringVal(s.String()), nil
	},
})

// cidrSubnetsFunc allocates consecutive subnets of the given sizes, as Terraform does.
var cidrSubnetsFunc = function.New(&function.Spec{
	Params:   []function.Parameter{{Name: "prefix", Type: cty.String}},
	VarParam: &function.Parameter{Name: "newbits", Type: cty.Number},
	Type:     function.StaticReturnType(cty.List(cty.String)),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		p, err := parsePrefix(args[0].AsString())
		if err != nil {
			return cty.NilVal, function.NewArgErrorf(0, "invalid CIDR expression: %s", err)
		}
		if len(args) == 1 {
			return cty.ListValEmpty(cty.String), nil
		}
		total := p.Addr().BitLen()
		next := addrInt(p.Addr())
		end := new(big.Int).Add(next, new(big.Int).Lsh(big.NewInt(1), uint(total-p.Bits())))
		out := make([]cty.Value, 0, len(args)-1)
		for i, nbv := range args[1:] {
			nb, err := numInt(nbv)
			if err != nil {
				return cty.NilVal, function.NewArgError(i+1, err)
			}
			bits := p.Bits() + int(nb.Int64())
			if nb.Sign() < 1 || bits > total {
				return cty.NilVal, function.NewArgErrorf(i+1, "would extend prefix to %d bits, which is too long for an IPv%d address", bits, map[bool]int{true: 4, false: 6}[p.Addr().Is4()])
			}
			size := new(big.Int).Lsh(big.NewInt(1), uint(total-bits))
			// Align next up to a multiple of size.
			rem := new(big.Int).Mod(next, size)
			if rem.Sign() != 0 {
				next.Add(next, new(big.Int).Sub(size, rem))
			}
			if new(big.Int).Add(next, size).Cmp(end) > 0 {
				return cty.NilVal, function.NewArgErrorf(i+1, "not enough remaining address space for a subnet with a prefix of %d bits after %s", bits, out[len(out)-1].AsString())
			}
			a, err := intAddr(next, p.Addr().Is4())
			if err != nil {
				return cty.NilVal, err
			}
			out = append(out, cty.StringVal(netip.PrefixFrom(a, bits).String()))
			next = new(big.Int).Add(next, size)
		}
		return cty.ListVal(out), nil
	},
})

var cidrContainsFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "containing_prefix", Type: cty.String}, {Name: "contained_ip_or_prefix", Type: cty.String}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		p, err := parsePrefix(args[0].AsString())
		if err != nil {
			return cty.NilVal, err
		}
		s := args[1].AsString()
		if a, err := netip.ParseAddr(s); err == nil {
			if a.Is4() != p.Addr().Is4() {
				return cty.NilVal, errors.New("address family mismatch")
			}
			return cty.BoolVal(p.Contains(a)), nil
		}
		q, err := parsePrefix(s)
		if err != nil {
			return cty.NilVal, err
		}
		if q.Addr().Is4() != p.Addr().Is4() {
			return cty.NilVal, errors.New("address family mismatch")
		}
		return cty.BoolVal(q.Bits() >= p.Bits() && p.Contains(q.Addr())), nil
	},
})
