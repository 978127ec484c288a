package attest

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
	"github.com/lava-operator/lava/internal/readmodel"
)

// Handler serves lava.v1.ReceiptService over connect: GetChain and VerifyChain read the chain
// from LAVA_RECEIPTS ([readmodel.ReadChain]) and [readmodel.Verify] it. It is the connect edge of this package:
// domain errors become connect codes here (InvalidArgument for a bad request, Unavailable
// when JetStream cannot be read). A foreign message on the chain's subject is skipped
// ([readmodel.ReadChain]) and passed to the handler's onForeign callback.
type Handler struct {
	js        jetstream.JetStream
	metrics   *Metrics
	onForeign func(context.Context, readmodel.Foreign)
}

var _ lavav1connect.ReceiptServiceHandler = (*Handler)(nil)

// NewHandler returns a Handler reading chains through js; metrics and onForeign (called for
// each foreign message a read skips; [ForeignReporter]) may be nil.
func NewHandler(js jetstream.JetStream, metrics *Metrics, onForeign func(context.Context, readmodel.Foreign)) *Handler {
	return &Handler{js: js, metrics: metrics, onForeign: onForeign}
}

// Mount returns the path prefix and the HTTP handler of the service ("/lava.v1.ReceiptService/").
func (h *Handler) Mount(opts ...connect.HandlerOption) (string, http.Handler) {
	return lavav1connect.NewReceiptServiceHandler(h, opts...)
}

// GetChain returns the receipts of a resource from from_sequence on; an unknown resource has an
// empty chain.
func (h *Handler) GetChain(ctx context.Context, req *connect.Request[lavav1.GetChainRequest]) (*connect.Response[lavav1.GetChainResponse], error) {
	chain, err := h.read(ctx, req.Msg.GetNamespace(), req.Msg.GetName(), readmodel.VerifyOptions{})
	if err != nil {
		return nil, err
	}
	from := req.Msg.GetFromSequence()
	out := make([]*lavav1.Receipt, 0, len(chain))
	for _, r := range chain {
		if r.GetSequence() >= from {
			out = append(out, r)
		}
	}
	return connect.NewResponse(&lavav1.GetChainResponse{Receipts: out}), nil
}

// VerifyChain verifies a resource's chain ([readmodel.Verify]); violations are in the response, not
// errors. A public_key that is not 32 bytes is InvalidArgument.
func (h *Handler) VerifyChain(ctx context.Context, req *connect.Request[lavav1.VerifyChainRequest]) (*connect.Response[lavav1.VerifyChainResponse], error) {
	opts := readmodel.VerifyOptions{RequireSignatures: req.Msg.GetRequireSignatures()}
	if pk := req.Msg.GetPublicKey(); len(pk) > 0 {
		if len(pk) != ed25519.PublicKeySize {
			return nil, connect.NewError(connect.CodeInvalidArgument,
				fmt.Errorf("public_key is %d bytes, want %d", len(pk), ed25519.PublicKeySize))
		}
		opts.PublicKey = ed25519.PublicKey(pk)
	}
	chain, err := h.read(ctx, req.Msg.GetNamespace(), req.Msg.GetName(), opts)
	if err != nil {
		return nil, err
	}
	res := readmodel.Verify(chain, opts)
	h.metrics.verified(res)
	return connect.NewResponse(VerifyResponse(res)), nil
}

// VerifyResponse converts a [readmodel.Result] to its wire form.
func VerifyResponse(res readmodel.Result) *lavav1.VerifyChainResponse {
	out := &lavav1.VerifyChainResponse{Ok: res.OK(), Length: res.Length, HeadHash: res.HeadHash}
	for _, f := range res.Failures {
		out.Failures = append(out.Failures, &lavav1.VerifyFailure{Index: f.Index, Message: f.Message})
	}
	return out
}

func (h *Handler) read(ctx context.Context, namespace, name string, opts readmodel.VerifyOptions) ([]*lavav1.Receipt, error) {
	if namespace == "" || name == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("namespace and name are required"))
	}
	chain, err := readmodel.ReadChain(ctx, h.js, namespace, name, opts)
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	for _, f := range chain.Foreign {
		if h.onForeign != nil {
			h.onForeign(ctx, f)
		}
	}
	return chain.Receipts, nil
}
