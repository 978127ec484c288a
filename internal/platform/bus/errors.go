package bus

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// PayloadTooLargeError is a message the server refuses because it is larger than the server's
// max_payload (1 MiB by default): Size is the message's body and encoded headers in bytes (what
// the limit applies to), Max the server's limit. Publishing it again fails again. It wraps
// nats.ErrMaxPayload.
type PayloadTooLargeError struct {
	Subject   string
	Size, Max int64
}

// Error implements error.
func (e *PayloadTooLargeError) Error() string {
	return fmt.Sprintf("bus: publish %s: the message is %d bytes, more than the server's maximum payload of %d bytes", e.Subject, e.Size, e.Max)
}

// Unwrap returns nats.ErrMaxPayload.
func (e *PayloadTooLargeError) Unwrap() error { return nats.ErrMaxPayload }

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
