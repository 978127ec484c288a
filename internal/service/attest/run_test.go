package attest_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/readmodel"
	"github.com/lava-operator/lava/internal/readmodel/receipttest"
	"github.com/lava-operator/lava/internal/service/attest"
)

// TestRun wires the whole service as services/attest does: with the signing key from a file,
// a PhaseChanged becomes a signed receipt that a gRPC client (cleartext HTTP/2) verifies
// through ReceiptService with signatures required.
func TestRun(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	bootstrap(t, srv)
	keyFile := filepath.Join(t.TempDir(), "signing-key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("0102", 16)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := readmodel.LoadSigner(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "rpc-token")
	if err := os.WriteFile(tokenFile, []byte("local-token-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, func(ctx context.Context) error {
		return attest.Run(ctx, attest.Options{Common: common(srv.URL()), SigningKeyFile: keyFile, Listener: ln, RPCTokenFile: tokenFile})
	})

	js := srv.JetStream()
	eventually(t, 10*time.Second, "the topology", func() bool {
		_, err := js.Consumer(t.Context(), bus.StreamPhases, bus.ServiceAttest)
		return err == nil
	})
	if _, err := bus.NewPublisher(js).PublishEvent(t.Context(), receipttest.PhaseChanged("infra", "vpc", 0, lavav1.Phase_PHASE_PENDING, 0)); err != nil {
		t.Fatal(err)
	}

	h2c := &http.Client{Transport: &http.Transport{Protocols: new(http.Protocols)}}
	h2c.Transport.(*http.Transport).Protocols.SetUnencryptedHTTP2(true)
	client := lavav1connect.NewReceiptServiceClient(h2c, "http://"+ln.Addr().String(), connect.WithGRPC())
	var res *connect.Response[lavav1.VerifyChainResponse]
	verify := func(token string) (*connect.Response[lavav1.VerifyChainResponse], error) {
		req := connect.NewRequest(&lavav1.VerifyChainRequest{
			Namespace: "infra", Name: "vpc", RequireSignatures: true, PublicKey: signer.PublicKey(),
		})
		if token != "" {
			req.Header().Set("Authorization", "Bearer "+token)
		}
		return client.VerifyChain(t.Context(), req)
	}
	for _, bad := range []string{"", "local-token-2"} {
		if _, err := verify(bad); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("VerifyChain with token %q: %v, want Unauthenticated", bad, err)
		}
	}
	eventually(t, 10*time.Second, "the receipt", func() bool {
		res, err = verify("local-token-1")
		if err != nil {
			t.Fatalf("VerifyChain over gRPC: %v", err)
		}
		return res.Msg.GetLength() == 1
	})
	if !res.Msg.GetOk() {
		t.Fatalf("chain: %v", res.Msg.GetFailures())
	}
}

// TestRun_badKey: an unreadable or malformed signing key stops the service at start, without
// quoting the key file's content.
func TestRun_badKey(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	bootstrap(t, srv)
	keyFile := filepath.Join(t.TempDir(), "signing-key")
	secretish := strings.Repeat("9", 63)
	if err := os.WriteFile(keyFile, []byte(secretish), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{keyFile, filepath.Join(t.TempDir(), "missing")} {
		err := attest.Run(t.Context(), attest.Options{Common: common(srv.URL()), SigningKeyFile: f})
		if err == nil || strings.Contains(err.Error(), secretish) {
			t.Fatalf("Run with key %s: %v", f, err)
		}
	}
}

// TestRun_requiresSigningKey: without a signing key attest refuses to start, unless
// --allow-unsigned.
func TestRun_requiresSigningKey(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	bootstrap(t, srv)
	err := attest.Run(t.Context(), attest.Options{Common: common(srv.URL())})
	if err == nil || !strings.Contains(err.Error(), "no signing key") {
		t.Fatalf("Run without a signing key: %v, want a refusal naming the signing key", err)
	}
}

// common is the service options of a test run against the NATS server at url: no metrics or
// health listener, logs discarded.
func common(url string) svc.Common {
	return svc.Common{NATS: bus.ConnectOptions{URL: url}, LogFormat: "text", LogLevel: "error", Stderr: io.Discard}
}

// bootstrap creates the topology as the bootstrap step does (`lava nats bootstrap`): the
// service only checks it.
func bootstrap(t *testing.T, srv *natstest.Server) {
	t.Helper()
	if err := bus.EnsureTopology(t.Context(), srv.JetStream(), bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
}
