package catalog

import "github.com/lava-operator/lava/internal/lang/arch"

// Interface returns the deflava-interface named name from the bundled file of the same name,
// with the error that [Get] drops (its Entry.Interface is then nil), so the tests see why.
// Errors: `unknown bundled architecture "NAME"` for a name not in the catalog; the reader's
// diagnostics (file:line:col: message) when the file's interfaces do not read; and
// `bundled architecture "NAME" has no deflava-interface NAME` when the form is missing.
func Interface(name string) (*arch.Interface, error) {
	src, ok := source(name)
	if !ok {
		return nil, &UnknownError{Name: name}
	}
	return readInterface(name, src)
}
