package engine

import (
	"slices"
	"strings"
	"time"
)

// Severity classifies a drift finding (docs/dialect.md section 6.1): cosmetic < functional < critical.
type Severity string

// Severities.
const (
	SeverityCosmetic   Severity = "cosmetic"
	SeverityFunctional Severity = "functional"
	SeverityCritical   Severity = "critical"
)

// Rank orders severities: 0 for none, 1 cosmetic, 2 functional, 3 critical.
func (s Severity) Rank() int {
	switch s {
	case SeverityCosmetic:
		return 1
	case SeverityFunctional:
		return 2
	case SeverityCritical:
		return 3
	}
	return 0
}

// DefaultCosmeticPrefixes returns the attribute prefixes whose updates are cosmetic by
// default: "tags.", "labels." and "metadata.0.labels." (a Kubernetes object's labels in the
// kubernetes provider's metadata block).
func DefaultCosmeticPrefixes() []string { return []string{"tags.", "labels.", "metadata.0.labels."} }

// Classify gives a finding's severity (docs/dialect.md section 6.1): delete and replace are critical, create
// is functional, an update is cosmetic when the attribute starts with one of prefixes, else
// functional. No-op and read have no severity ("").
func Classify(change Action, attribute string, prefixes []string) Severity {
	switch change {
	case ActionDelete, ActionReplace:
		return SeverityCritical
	case ActionCreate:
		return SeverityFunctional
	case ActionUpdate:
		for _, p := range prefixes {
			if strings.HasPrefix(attribute, p) {
				return SeverityCosmetic
			}
		}
		return SeverityFunctional
	}
	return ""
}

// Placeholders used in findings instead of values.
const (
	// Redacted replaces a sensitive value.
	Redacted = "(sensitive)"
	// Unknown replaces a value known only after apply.
	Unknown = "(known after apply)"
)

// Finding is one drifted attribute (docs/dialect.md section 6.1: a finding with its severity).
type Finding struct {
	// Address is the resource instance address ("local_file.a").
	Address string `json:"address"`
	// Attribute is the attribute path in dotted form ("tags.Owner", "ingress.0.cidr"), or
	// "*" for the whole resource.
	Attribute string `json:"attribute"`
	// Change is what converging would do: create, update, delete or replace.
	Change Action `json:"change"`
	// Observed is the value found in the real world, Declared the configured one: strings as
	// they are, other values as compact JSON; nil when absent; [Redacted] when sensitive.
	Observed *string  `json:"observed,omitempty"`
	Declared *string  `json:"declared,omitempty"`
	Severity Severity `json:"severity"`
}

// DriftReport is a drift scan's result.
type DriftReport struct {
	// ScannedAt is when the scan finished (UTC).
	ScannedAt time.Time `json:"scannedAt"`
	// Findings ("driftedFields" upstream), ordered by address then attribute.
	Findings []Finding `json:"driftedFields"`
	// MaxSeverity is the highest severity, "" when clean.
	MaxSeverity Severity `json:"maxSeverity,omitempty"`
	// StateSerial and StateLineage are the state scanned.
	StateSerial  uint64 `json:"stateSerial"`
	StateLineage string `json:"stateLineage"`
}

// Clean reports whether nothing drifted.
func (r *DriftReport) Clean() bool { return len(r.Findings) == 0 }

// AtOrAbove returns the findings of severity min or higher.
func (r *DriftReport) AtOrAbove(min Severity) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Severity.Rank() >= min.Rank() {
			out = append(out, f)
		}
	}
	return out
}

// Finish sorts the findings and sets MaxSeverity.
func (r *DriftReport) Finish() {
	slices.SortStableFunc(r.Findings, func(a, b Finding) int {
		if c := strings.Compare(a.Address, b.Address); c != 0 {
			return c
		}
		return strings.Compare(a.Attribute, b.Attribute)
	})
	r.MaxSeverity = ""
	for _, f := range r.Findings {
		if f.Severity.Rank() > r.MaxSeverity.Rank() {
			r.MaxSeverity = f.Severity
		}
	}
}
