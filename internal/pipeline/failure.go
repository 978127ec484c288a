package pipeline

// FailureKind says what a stage failure means for the stage's retries, as the error kinds of
// Flux's controllers do (fluxcd/source-controller internal/error: Stalling, Waiting, Generic).
// A Failed event carries it as retryable: false for [FailureTerminal], true for the others.
type FailureKind int

const (
	// FailureTerminal: the same generation fails the same way again (a rejected policy, an
	// unknown provider version); nothing is retried until the spec changes (kstatus Stalled).
	// The zero kind.
	FailureTerminal FailureKind = iota
	// FailureRetryable: a transient failure (an engine error, a forbidden read an RBAC change
	// fixes); viggy retries the stage on its schedule.
	FailureRetryable
	// FailureWaiting: the stage waits for something outside it to appear (an object its
	// bindings read); viggy retries the stage on its schedule, as for FailureRetryable.
	FailureWaiting
)

// String is the kind's name: "terminal", "retryable" or "waiting".
func (k FailureKind) String() string {
	switch k {
	case FailureRetryable:
		return "retryable"
	case FailureWaiting:
		return "waiting"
	}
	return "terminal"
}

// Failure is a stage failure a service publishes as Failed: its kind (the event's retryable),
// its CamelCase reason (api/v1alpha1.Reason*), its message (before redaction) and, when there
// is one, the error it comes from. It is an error: errors.As finds it in a chain, and Unwrap
// reaches Err.
type Failure struct {
	Kind FailureKind
	// Reason is the Failed reason, one of api/v1alpha1's Reason* constants.
	Reason string
	// Message is the Failed message, before the service redacts it and bounds its size.
	Message string
	// Err is the cause, if any (an engine error, the violations of a policy); nil otherwise.
	Err error
}

// Retryable reports whether the stage is retried: the Failed event's retryable (every kind but
// [FailureTerminal]).
func (f *Failure) Retryable() bool { return f.Kind != FailureTerminal }

// Error is "Reason: Message" (Message alone without a reason; Err's text without a message).
func (f *Failure) Error() string {
	msg := f.Message
	if msg == "" && f.Err != nil {
		msg = f.Err.Error()
	}
	if f.Reason == "" {
		return msg
	}
	return f.Reason + ": " + msg
}

// Unwrap returns Err.
func (f *Failure) Unwrap() error { return f.Err }
