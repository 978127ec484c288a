package tlisp

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/lava-operator/lava/internal/lang/arch"
)

// Pos is a source position: file, 1-based line, 1-based column in runes and 0-based byte offset.
type Pos = arch.Pos

// MaxDiagnostics caps the errors one call reports; evaluation stops once it is reached.
const MaxDiagnostics = 50

// MaxMessageLen bounds a diagnostic's message, in bytes: a message quoting a value the source
// or its bindings made (a name, a string) is cut there (at a UTF-8 boundary, then "…"), so no
// input makes a diagnostic, or what carries it (a Synthesized gate verdict, a phase event, a
// receipt), large.
const MaxMessageLen = 512

// message formats a diagnostic's message and cuts it to [MaxMessageLen].
func message(format string, args ...any) string { return cut(fmt.Sprintf(format, args...)) }

// cut returns m cut to [MaxMessageLen] bytes.
func cut(m string) string {
	if len(m) <= MaxMessageLen {
		return m
	}
	return strings.ToValidUTF8(m[:MaxMessageLen], "") + "…"
}

// Severity classifies a [Diagnostic].
type Severity int

// Severities: an error makes the source unusable; a warning does not.
const (
	SeverityError Severity = iota
	SeverityWarning
)

// String returns "error" or "warning".
func (s Severity) String() string {
	if s == SeverityWarning {
		return "warning"
	}
	return "error"
}

// Diagnostic is one error or warning with the position it is about.
type Diagnostic struct {
	Pos      Pos
	Severity Severity
	Message  string
}

// String formats an error as "file:line:col: message" and a warning as
// "file:line:col: warning: message". Without a file the position is "line:col"; without a
// position the message stands alone. The message is cut to [MaxMessageLen] whoever built the
// Diagnostic.
func (d Diagnostic) String() string {
	var b strings.Builder
	if d.Pos.IsValid() {
		b.WriteString(d.Pos.String())
		b.WriteString(": ")
	}
	if d.Severity == SeverityWarning {
		b.WriteString("warning: ")
	}
	b.WriteString(cut(d.Message))
	return b.String()
}

// Error returns [Diagnostic.String], so a Diagnostic can be used as an error (errors.As finds
// it through [Diagnostics.Err]).
func (d Diagnostic) Error() string { return d.String() }

// Diagnostics is a list of diagnostics in source order.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Errors returns only the errors.
func (ds Diagnostics) Errors() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == SeverityError {
			out = append(out, d)
		}
	}
	return out
}

// Warnings returns only the warnings.
func (ds Diagnostics) Warnings() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == SeverityWarning {
			out = append(out, d)
		}
	}
	return out
}

// Error returns the first error's String (or the first diagnostic's when there is no error),
// so Diagnostics satisfies the error interface. Because of it fmt's %v prints only that line:
// use [Diagnostics.String] for all of them, and [Diagnostics.Err] for an error value.
func (ds Diagnostics) Error() string {
	for _, d := range ds {
		if d.Severity == SeverityError {
			return d.String()
		}
	}
	if len(ds) > 0 {
		return ds[0].String()
	}
	return "no diagnostics"
}

// String returns every diagnostic's String, one per line.
func (ds Diagnostics) String() string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(d.String())
	}
	return b.String()
}

// Err returns nil when ds has no error. Otherwise it returns an *[ErrorList] whose message is
// the first error's String and which unwraps to the list: errors.As(err, &el) with an
// *ErrorList target gives every diagnostic, errors.As(err, &d) with a Diagnostic target the
// first error (see also [AsDiagnostics]).
func (ds Diagnostics) Err() error {
	if !ds.HasErrors() {
		return nil
	}
	return &ErrorList{Diags: ds}
}

// ErrorList is the error [Diagnostics.Err] returns.
type ErrorList struct {
	// Diags holds every diagnostic (errors and warnings) of the failed call.
	Diags Diagnostics
}

// Error returns the first error's "file:line:col: message".
func (e *ErrorList) Error() string {
	for _, d := range e.Diags {
		if d.Severity == SeverityError {
			return d.String()
		}
	}
	return "no error"
}

// Unwrap returns each error diagnostic as an error.
func (e *ErrorList) Unwrap() []error {
	var out []error
	for _, d := range e.Diags {
		if d.Severity == SeverityError {
			out = append(out, d)
		}
	}
	return out
}

// sortDiags orders diagnostics by byte offset (diagnostics without a position last), keeping
// the evaluation order of equal positions.
func sortDiags(ds Diagnostics) {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		av, bv := a.Pos.IsValid(), b.Pos.IsValid()
		switch {
		case av && !bv:
			return -1
		case !av && bv:
			return 1
		}
		return cmp.Compare(a.Pos.Offset, b.Pos.Offset)
	})
}
