package bus

import "errors"

// PermanentError marks a handler error that no redelivery can fix (a malformed event, a
// rejected input). [Consume] terminates the message instead of retrying it and reports it to
// the poison callback. Build one with [Permanent]; test with errors.As or [IsPermanent].
type PermanentError struct {
	Err error
}

// Permanent wraps err as a [PermanentError]; Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// Error implements error.
func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// IsPermanent reports whether err is or wraps a [PermanentError].
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}
