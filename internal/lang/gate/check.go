package gate

import (
	"fmt"
	"strings"

	"github.com/lava-operator/lava/internal/lang/arch"
)

// ArchInput is one entry of an architecture's :inputs clause, as far as the gate needs it.
type ArchInput struct {
	Name string
	// HasDefault is true when the entry carries a default value.
	HasDefault bool
	// Pos is where the entry starts (zero when unknown).
	Pos arch.Pos
}

// Severity of a [Finding].
type Severity int

// Severities, the zero value a warning.
const (
	SeverityWarning Severity = iota
	SeverityError
)

// Finding is one disagreement between an interface and an architecture.
type Finding struct {
	Severity Severity
	// Input names the input concerned ("" when the finding lists several).
	Input   string
	Message string
	// Pos is the architecture input's position when the finding is about one, else zero.
	Pos arch.Pos
}

// MaxUndeclaredWarnings caps the warnings [CheckArchitecture] gives one by one about
// architecture inputs a closed interface does not declare (the architecture's author chooses
// how many inputs there are: 9,000 made a Synthesized event larger than NATS' max payload).
const MaxUndeclaredWarnings = 50

// CheckArchitecture compares iface with the architecture inputs it gates (Lava's addition to
// upstream, which gates by name without looking at the architecture). In order:
//   - an error for each interface input that is required, has no default and is not declared
//     by the architecture: the gate demands a binding the architecture never reads;
//   - when the interface is closed (no :any or :dynamic input), a warning for each architecture
//     input the interface does not declare: the gate rejects any binding for it, so only its
//     default can ever be used (at most [MaxUndeclaredWarnings] of them, then one warning
//     "… and N more");
//   - one warning listing the other interface inputs the architecture does not declare:
//     bindings for them pass the gate and are then ignored.
//
// A nil iface gives no findings.
func CheckArchitecture(iface *arch.Interface, inputs []ArchInput) []Finding {
	if iface == nil {
		return nil
	}
	declared := make(map[string]bool, len(inputs))
	for _, in := range inputs {
		declared[in.Name] = true
	}
	var out []Finding
	var ignored []string
	for _, f := range iface.Inputs {
		if declared[f.Name] {
			continue
		}
		if f.Required && f.Default == nil {
			out = append(out, Finding{
				Severity: SeverityError,
				Input:    f.Name,
				Message: fmt.Sprintf("interface `%s` requires input `%s`, which the architecture does not declare in :inputs",
					iface.Name, f.Name),
			})
			continue
		}
		ignored = append(ignored, "`"+f.Name+"`")
	}
	open := false
	for _, f := range iface.Inputs {
		if f.Loose || f.Type.IsLoose() {
			open = true
		}
	}
	if !open {
		warned, more := 0, 0
		for _, in := range inputs {
			if _, ok := iface.Input(in.Name); ok {
				continue
			}
			if warned == MaxUndeclaredWarnings {
				more++
				continue
			}
			warned++
			msg := fmt.Sprintf("architecture input `%s` is not declared by interface `%s`, which rejects any binding for it",
				in.Name, iface.Name)
			if !in.HasDefault {
				msg += "; it has no default, so evaluation cannot succeed through this gate"
			}
			out = append(out, Finding{Severity: SeverityWarning, Input: in.Name, Message: msg, Pos: in.Pos})
		}
		if more > 0 {
			out = append(out, Finding{Severity: SeverityWarning,
				Message: fmt.Sprintf("… and %d more architecture input(s) not declared by interface `%s`, which rejects any binding for them", more, iface.Name)})
		}
	}
	if len(ignored) > 0 {
		out = append(out, Finding{
			Severity: SeverityWarning,
			Message: fmt.Sprintf("interface `%s` declares input(s) %s that the architecture does not; bindings for them pass the gate and are ignored",
				iface.Name, strings.Join(ignored, ", ")),
		})
	}
	return out
}
