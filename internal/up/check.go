package up

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// FieldError is one admission rule of the LavaArchitecture CRD that a manifest breaks.
type FieldError struct {
	// Path is the offending field as the API server names it: "metadata.name", "spec.engine",
	// "spec.bindingsFrom[1]".
	Path string
	// Message says what is wrong (it starts with Path).
	Message string
}

func (e FieldError) Error() string { return e.Message }

// approvePlanPattern is spec.approvePlan's CRD pattern.
var approvePlanPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

// minDriftInterval is spec.driftInterval's CRD minimum.
const minDriftInterval = 30 * time.Second

// CheckObject applies the LavaArchitecture CRD's admission rules that decide whether Lava can
// run o (the same rules for `lava validate` and `lava up`): metadata.name set and a DNS-1123
// subdomain, metadata.namespace (when set) a DNS-1123 label, exactly one of
// spec.source.inline, name and url (url with rev and path, rev and path only with url), the
// spec.engine and spec.deletionPolicy enums, each spec.bindingsFrom entry with exactly one of
// configMapRef and secretRef naming an object, spec.driftInterval of at least 30s,
// spec.approvePlan's pattern, and spec.remediation and spec.remediationPolicyRef not both set
// (nor Escalate in spec.remediation). The result is in field order; nil when o passes.
func CheckObject(o *v1alpha1.LavaArchitecture) []FieldError {
	var errs []FieldError
	add := func(path, format string, args ...any) {
		errs = append(errs, FieldError{Path: path, Message: path + ": " + fmt.Sprintf(format, args...)})
	}
	switch {
	case o.Name == "":
		add("metadata.name", "required")
	default:
		for _, m := range validation.IsDNS1123Subdomain(o.Name) {
			add("metadata.name", "%q is not a DNS-1123 subdomain: %s", o.Name, m)
			break
		}
	}
	if o.Namespace != "" {
		for _, m := range validation.IsDNS1123Label(o.Namespace) {
			add("metadata.namespace", "%q is not a DNS-1123 label: %s", o.Namespace, m)
			break
		}
	}
	s := o.Spec
	n := 0
	for _, set := range []bool{s.Source.Inline != "", s.Source.Name != "", s.SourceRef != nil} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		add("spec.source", "exactly one of spec.source.inline, spec.source.name or spec.sourceRef must be set (%d set)", n)
	case s.SourceRef != nil && s.Path == "":
		add("spec.path", "required with spec.sourceRef")
	case s.SourceRef == nil && s.Path != "":
		add("spec.path", "only valid with spec.sourceRef")
	}
	for i, b := range s.BindingsFrom {
		path := "spec.bindingsFrom[" + strconv.Itoa(i) + "]"
		n := 0
		for _, set := range []bool{b.ConfigMapRef != nil, b.SecretRef != nil, b.OutputsRef != nil} {
			if set {
				n++
			}
		}
		switch {
		case n != 1:
			add(path, "exactly one of configMapRef, secretRef or outputsRef must be set")
		case b.ConfigMapRef != nil && b.ConfigMapRef.Name == "":
			add(path+".configMapRef.name", "required")
		case b.SecretRef != nil && b.SecretRef.Name == "":
			add(path+".secretRef.name", "required")
		case b.OutputsRef != nil && b.OutputsRef.Name == "":
			add(path+".outputsRef.name", "required")
		}
	}
	switch s.Engine {
	case "", v1alpha1.EngineEmbedded, v1alpha1.EngineTofu, v1alpha1.EngineTerraform:
	default:
		add("spec.engine", "unsupported value %q: want embedded, tofu or terraform", s.Engine)
	}
	if s.DriftInterval != nil && s.DriftInterval.Duration < minDriftInterval {
		add("spec.driftInterval", "must be at least 30s (got %s)", s.DriftInterval.Duration)
	}
	switch s.DeletionPolicy {
	case "", v1alpha1.DeletionPolicyDestroy, v1alpha1.DeletionPolicyOrphan:
	default:
		add("spec.deletionPolicy", "unsupported value %q: want Destroy or Orphan", s.DeletionPolicy)
	}
	if s.Remediation != nil {
		if s.RemediationPolicyRef != nil {
			add("spec.remediationPolicyRef", "spec.remediation and spec.remediationPolicyRef are mutually exclusive: set at most one")
		}
		for _, a := range []v1alpha1.RemediationAction{s.Remediation.Cosmetic, s.Remediation.Functional, s.Remediation.Critical} {
			if a == v1alpha1.RemediationEscalate {
				add("spec.remediation", "Escalate needs an escalation ladder; use spec.remediationPolicyRef to a RemediationPolicy with spec.escalation.tiers")
				break
			}
		}
	}
	if a := s.ApprovePlan; a != "" && (len(a) > 128 || !approvePlanPattern.MatchString(a)) {
		add("spec.approvePlan", "%q must match %s (at most 128 characters)", a, approvePlanPattern)
	}
	return errs
}

// FieldNode returns the YAML node to point at for path (a [FieldError.Path]) in a document's
// root mapping: the key node of the deepest mapping entry of path that exists, or the item of
// a sequence index ("spec.bindingsFrom[1]"); root itself when not even the first field
// exists.
func FieldNode(root *yaml.Node, path string) *yaml.Node {
	at, cur := root, root
	for _, part := range strings.Split(path, ".") {
		name, idx := part, -1
		if i := strings.IndexByte(part, '['); i > 0 && strings.HasSuffix(part, "]") {
			name = part[:i]
			if n, err := strconv.Atoi(part[i+1 : len(part)-1]); err == nil {
				idx = n
			}
		}
		if cur == nil || cur.Kind != yaml.MappingNode {
			return at
		}
		var val *yaml.Node
		for j := 0; j+1 < len(cur.Content); j += 2 {
			if cur.Content[j].Value == name {
				at, val = cur.Content[j], cur.Content[j+1]
				break
			}
		}
		if val == nil {
			return at
		}
		if idx >= 0 {
			if val.Kind != yaml.SequenceNode || idx >= len(val.Content) {
				return at
			}
			val = val.Content[idx]
			at = val
		}
		cur = val
	}
	return at
}
