package readmodel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// Chain is a resource's receipt chain as read from LAVA_RECEIPTS.
type Chain struct {
	// Receipts in chain order.
	Receipts []*lavav1.Receipt
	// Foreign are the other messages on the chain's subject, skipped, in stream order.
	Foreign []Foreign
}

// ReadChain reads a resource's chain from LAVA_RECEIPTS, in order, up to the subject's last
// message stored when it started (receipts appended meanwhile are left out). An unknown
// resource has an empty chain. Only attest appends receipts: a message on the subject that is
// not the chain's next receipt (not a receipt, a content_hash that does not recompute, a
// signature that does not verify with its own key, a sequence or prev_hash that does not
// follow the head) is skipped and returned in Chain.Foreign; it never makes the chain
// unreadable. With opts.PublicKey a receipt signed with that key stays in the chain even out of
// place, so [Verify] reports a removed receipt. Errors are JetStream's, wrapped.
func ReadChain(ctx context.Context, js jetstream.JetStream, namespace, name string, opts VerifyOptions) (*Chain, error) {
	subject := bus.ReceiptSubject(namespace, name)
	stream, err := js.Stream(ctx, bus.StreamReceipts)
	if err != nil {
		return nil, fmt.Errorf("readmodel: stream %s: %w", bus.StreamReceipts, err)
	}
	last, err := stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return &Chain{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("readmodel: read tail of %s: %w", subject, err)
	}
	l, err := ReadLinked(ctx, stream, namespace, name, last.Sequence, opts)
	if err != nil {
		return nil, err
	}
	c := &Chain{Foreign: l.Foreign}
	for _, m := range l.Members {
		c.Receipts = append(c.Receipts, m.Receipt)
	}
	return c, nil
}

// Linked is what [ReadLinked] finds on a chain's subject: the receipts that form the chain,
// with where they are stored, and the foreign messages, both in stream order.
type Linked struct {
	Members []Member
	Foreign []Foreign
}

// ReadLinked reads the messages of namespace/name's receipt subject in stream (LAVA_RECEIPTS),
// up to stream sequence last, and links them as [ReadChain] does: a message joins the chain
// only when it decodes as a receipt, its content_hash recomputes, it is unsigned or its
// signature verifies with its own key, and it follows the chain's head (with opts.PublicKey a
// receipt signed with that key joins out of place too); every other message is [Foreign].
// Errors are JetStream's, wrapped, or the stream sequence last never arriving.
func ReadLinked(ctx context.Context, stream jetstream.Stream, namespace, name string, last uint64, opts VerifyOptions) (*Linked, error) {
	subject := bus.ReceiptSubject(namespace, name)
	// The ordered consumer is ephemeral; the server removes it after 30s of inactivity, and
	// it is deleted at once when the chain has been read.
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject}, InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("readmodel: read %s: %w", subject, err)
	}
	defer func() {
		if info := cons.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = stream.DeleteConsumer(dctx, info.Name) // best effort: it expires anyway
		}
	}()
	l := newLinker(namespace, name, opts)
	for empty := 0; ; {
		batch, err := cons.Fetch(512, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("readmodel: read %s: %w", subject, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("readmodel: read %s: %w", subject, err)
			}
			l.add(md.Sequence.Stream, m.Headers(), m.Data(), md.Timestamp)
			if md.Sequence.Stream >= last {
				return &Linked{Members: l.members, Foreign: l.foreign}, nil
			}
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("readmodel: read %s: %w", subject, err)
		}
		if got == 0 {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("readmodel: read %s: %w", subject, ctx.Err())
			}
			if empty++; empty >= 3 {
				return nil, fmt.Errorf("readmodel: read %s: stream sequence %d never arrived", subject, last)
			}
		}
	}
}
