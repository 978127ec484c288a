package policy

// String is "file:line:col: message" (the message alone without a position), how the tests
// print a violation (render.CheckPolicy reports its position and message as a diagnostic).
func (v Violation) String() string {
	if v.Pos.IsValid() {
		return v.Pos.String() + ": " + v.Message
	}
	return v.Message
}
