package engine

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"
)

// RedactedText replaces a secret in error text.
const RedactedText = "(redacted)"

// Redactor scrubs secret values from text. The zero value redacts nothing.
type Redactor struct {
	secrets []string
}

// NewRedactor returns a Redactor for the given secrets (empty strings are ignored).
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add adds secrets; longer secrets are replaced first so one containing another is hidden whole.
func (r *Redactor) Add(secrets ...string) {
	for _, s := range secrets {
		if s != "" && !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
		}
	}
	slices.SortStableFunc(r.secrets, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
}

// Redact returns s with every secret replaced by [RedactedText].
func (r *Redactor) Redact(s string) string {
	if r == nil {
		return s
	}
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, RedactedText)
	}
	return s
}

// Tail returns at most max bytes from the end of s, starting at a line boundary when one is
// near, with surrounding blank space trimmed.
func Tail(s string, max int) string {
	s = strings.TrimSpace(s)
	if len(s) <= max {
		return s
	}
	s = s[len(s)-max:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < max/2 {
		s = s[i+1:]
	}
	return "…" + strings.TrimSpace(s)
}
