package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// ErrUndecodable is the error of [LastEvent] for a stored body that is not the message asked
// for (a poison message that bus.Consume would terminate).
var ErrUndecodable = errors.New("bus: stored message does not decode")

// LastMsg is the newest message stored on subject in st (a resource's newest
// ResourceObserved, Synthesized, DeletionRequested, receipt); nil and no error when the subject
// has none. Other errors are JetStream's, wrapped with the subject.
func LastMsg(ctx context.Context, st jetstream.Stream, subject string) (*jetstream.RawStreamMsg, error) {
	raw, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bus: last message on %s: %w", subject, err)
	}
	return raw, nil
}

// LastEvent decodes the newest message stored on subject in st into m; false when the subject
// has none. A body that does not decode into m is a [Permanent] error wrapping
// [ErrUndecodable] (retrying cannot change it).
func LastEvent(ctx context.Context, st jetstream.Stream, subject string, m proto.Message) (bool, error) {
	raw, err := LastMsg(ctx, st, subject)
	if err != nil || raw == nil {
		return false, err
	}
	if err := proto.Unmarshal(raw.Data, m); err != nil {
		return false, Permanent(fmt.Errorf("%w: %s: %w", ErrUndecodable, subject, err))
	}
	return true, nil
}
