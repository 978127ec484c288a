package manifest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// fieldError words e, an error of the API server's validation of obj, for a terminal: "PATH:
// MESSAGE", where MESSAGE is
//   - "required" for a missing value (or an empty one where the schema asks for at least one
//     character);
//   - `unsupported value "V": want A, B or C` for a value outside an enum;
//   - `"V" must match PATTERN` for a value that does not match the schema's pattern;
//   - `"V" is not a DNS-1123 subdomain: DETAIL` (or label) for a bad metadata.name (namespace);
//   - for a CEL rule (cel set), the rule's message without a leading PATH (the CRD's messages
//     start with the field they are about), except the rules of celWording;
//   - otherwise the API server's own "Invalid value: ...: DETAIL".
func fieldError(e *field.Error, obj *v1alpha1.LavaArchitecture, cel bool) FieldError {
	path, msg := e.Field, ""
	if path == "<nil>" {
		path = ""
	}
	// The schema validator says where in its own words: "spec.engine in body should match".
	detail := strings.TrimPrefix(e.Detail, e.Field+" in body ")
	switch {
	case cel:
		if w, ok := celWording[e.Detail]; ok {
			path, msg = w(obj)
		} else {
			msg = trimPath(e.Detail, path)
		}
	case e.Type == field.ErrorTypeRequired,
		// A required string of the Go type is encoded even when empty ("name": ""): for the
		// schema it is there and too short.
		e.Type == field.ErrorTypeInvalid && e.BadValue == "" && detail == "should be at least 1 chars long":
		msg = "required"
	case e.Type == field.ErrorTypeNotSupported:
		msg = fmt.Sprintf("unsupported value %q", fmt.Sprint(e.BadValue))
		if vs := quotedList(strings.TrimPrefix(e.Detail, "supported values: ")); len(vs) > 0 {
			msg += ": want " + orList(vs)
		}
	case e.Type == field.ErrorTypeInvalid && strings.HasPrefix(detail, "should match '") && strings.HasSuffix(detail, "'"):
		msg = fmt.Sprintf("%q must match %s", fmt.Sprint(e.BadValue), strings.TrimSuffix(strings.TrimPrefix(detail, "should match '"), "'"))
	case e.Type == field.ErrorTypeInvalid && strings.HasPrefix(e.Detail, "a lowercase RFC 1123 subdomain"):
		msg = fmt.Sprintf("%q is not a DNS-1123 subdomain: %s", fmt.Sprint(e.BadValue), e.Detail)
	case e.Type == field.ErrorTypeInvalid && strings.HasPrefix(e.Detail, "a lowercase RFC 1123 label"):
		msg = fmt.Sprintf("%q is not a DNS-1123 label: %s", fmt.Sprint(e.BadValue), e.Detail)
	default:
		short := *e
		short.Detail = detail
		msg = short.ErrorBody()
	}
	if path == "" {
		return FieldError{Message: msg}
	}
	return FieldError{Path: path, Message: path + ": " + msg}
}

// celWording words the CEL rules of the CRD (api/v1alpha1 markers) whose message is the key
// with more than the rule says: how many source kinds are set, which way spec.path and
// spec.sourceRef disagree, and the driftInterval given. Each returns the field path to report
// and the message.
var celWording = map[string]func(*v1alpha1.LavaArchitecture) (string, string){
	"spec.source: exactly one of spec.source.inline or spec.source.name must be set (a git repository: spec.sourceRef to a Flux GitRepository)": sourceKinds,
	"spec: exactly one of spec.source and spec.sourceRef must be set":                                                                           sourceKinds,
	"spec.path is required with spec.sourceRef and only valid with it": func(o *v1alpha1.LavaArchitecture) (string, string) {
		if o.Spec.SourceRef != nil {
			return "spec.path", "required with spec.sourceRef"
		}
		return "spec.path", "only valid with spec.sourceRef"
	},
	"spec.driftInterval must be at least 30s": func(o *v1alpha1.LavaArchitecture) (string, string) {
		msg := "must be at least 30s"
		if o.Spec.DriftInterval != nil {
			msg += fmt.Sprintf(" (got %s)", o.Spec.DriftInterval.Duration)
		}
		return "spec.driftInterval", msg
	},
}

// sourceKinds is the message of the source rules: spec.source.inline, spec.source.name and
// spec.sourceRef, exactly one of which may be set, with how many are.
func sourceKinds(o *v1alpha1.LavaArchitecture) (string, string) {
	n := 0
	for _, set := range []bool{o.Spec.Source.Inline != "", o.Spec.Source.Name != "", o.Spec.SourceRef != nil} {
		if set {
			n++
		}
	}
	return "spec.source", fmt.Sprintf("exactly one of spec.source.inline, spec.source.name or spec.sourceRef must be set (%d set)", n)
}

// trimPath drops a leading "PATH: " or "PATH " from msg, PATH being path or path with its
// indices left out ("spec.bindingsFrom[]" for "spec.bindingsFrom[0]"), as a CRD rule names the
// field it is about.
func trimPath(msg, path string) string {
	if path == "" {
		return msg
	}
	generic := indexRE.ReplaceAllString(path, "[]")
	for _, p := range []string{path, generic} {
		for _, sep := range []string{": ", " "} {
			if rest, ok := strings.CutPrefix(msg, p+sep); ok {
				return rest
			}
		}
	}
	return msg
}

// indexRE matches an index or key of a field path ("[0]", "[key]").
var indexRE = regexp.MustCompile(`\[[^\]]*\]`)

// quotedList reads a list of Go-quoted strings separated by ", " (field.NotSupported's
// detail); nil when s is not one.
func quotedList(s string) []string {
	var out []string
	for s != "" {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return nil
		}
		v, _ := strconv.Unquote(q)
		out = append(out, v)
		s = strings.TrimPrefix(s[len(q):], ", ")
	}
	return out
}

// orList is "a", "a or b", "a, b or c".
func orList(vs []string) string {
	if len(vs) == 1 {
		return vs[0]
	}
	return strings.Join(vs[:len(vs)-1], ", ") + " or " + vs[len(vs)-1]
}
