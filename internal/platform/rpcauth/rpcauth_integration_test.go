//go:build integration

package rpcauth_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"runtime"
	"testing"

	"connectrpc.com/connect"
	"k8s.io/client-go/kubernetes"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
	"github.com/lava-operator/lava/internal/platform/httpserver"
	"github.com/lava-operator/lava/internal/platform/rpcauth"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
)

// TestGuard_renderService serves the real RenderService behind the guard with TokenReview and
// SubjectAccessReview on a real kube-apiserver: no token and a forged token are
// Unauthenticated, a token without create in the namespace is PermissionDenied (also for a
// namespace where it may only get), an allowed caller renders, and a 100 MiB request is refused
// without the server reading it into memory. Then, with TokenReview: 64 forged-token 4 MiB
// requests at once allocate under 32 MiB (no body read), and the in-flight limit binds per
// remote address (another user from it is refused) and per user (the same user from another
// address is refused).
func TestGuard_renderService(t *testing.T) {
	env := kubetest.Start(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns, other := env.Namespace(t), env.Namespace(t)
	creator := env.ServiceAccountToken(t, ns, "creator", "create")
	reader := env.ServiceAccountToken(t, ns, "reader", "get")
	nobody := env.ServiceAccountToken(t, ns, "nobody")

	kube := rpcauth.Kube{Client: cs}
	url := serveRender(t, rpcauth.Guard{Authn: kube, Authz: kube})
	client := lavav1connect.NewRenderServiceClient(http.DefaultClient, url)
	render := func(token, namespace string) error {
		req := connect.NewRequest(&lavav1.RenderRequest{Source: &lavav1.RenderRequest_Name{Name: "aws-vpc-network"}, Namespace: namespace})
		if token != "" {
			req.Header().Set("Authorization", "Bearer "+token)
		}
		_, err := client.Render(t.Context(), req)
		return err
	}
	tests := []struct {
		name, token, namespace string
		want                   connect.Code
	}{
		{"no token", "", ns, connect.CodeUnauthenticated},
		{"forged token", "eyJhbGciOiJSUzI1NiJ9.forged.token", ns, connect.CodeUnauthenticated},
		{"no permission", nobody, ns, connect.CodePermissionDenied},
		{"get only", reader, ns, connect.CodePermissionDenied},
		{"another namespace", creator, other, connect.CodePermissionDenied},
		{"no namespace", creator, "", connect.CodeInvalidArgument},
		{"allowed", creator, ns, 0},
	}
	for _, tt := range tests {
		err := render(tt.token, tt.namespace)
		if tt.want == 0 {
			if err != nil {
				t.Errorf("%s: %v, want success", tt.name, err)
			}
			continue
		}
		if got := connect.CodeOf(err); got != tt.want {
			t.Errorf("%s: %v (code %v), want %v", tt.name, err, got, tt.want)
		}
	}

	// 100 MiB streamed from a generator (the client holds none of it): refused, and the
	// process allocates far less than the body.
	const huge = 100 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	body := io.LimitReader(repeat('x'), huge)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+lavav1connect.RenderServiceRenderProcedure, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/proto")
	req.Header.Set("Authorization", "Bearer "+creator)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("a 100 MiB request was accepted: %s", b)
		}
		if !bytes.Contains(b, []byte("resource_exhausted")) && resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("100 MiB request: status %d %s, want resource_exhausted", resp.StatusCode, b)
		}
	} else if !errors.Is(err, io.ErrClosedPipe) {
		t.Logf("100 MiB request: the server closed the connection: %v", err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > huge/4 {
		t.Errorf("the process allocated %d MiB for a refused 100 MiB request, want under %d MiB", grew>>20, huge/4>>20)
	}

	t.Run("anonymous flood", func(t *testing.T) {
		// every forged token goes to TokenReview, and no body is read
		url := serveRender(t, rpcauth.Guard{Authn: kube, Authz: kube, Limits: rpcauth.Limits{MaxInFlight: floodRequests,
			MaxInFlightPerClient: floodRequests, Server: httpserver.Limits{MaxConns: 2 * floodRequests, MaxConnsPerClient: 2 * floodRequests}}})
		if alloc := anonymousFlood(t, url, "eyJhbGciOiJSUzI1NiJ9.forged.token", floodRequests); alloc > floodAllocBound {
			t.Errorf("%d forged-token 4 MiB requests made the process allocate %d MiB, want under %d MiB", floodRequests, alloc>>20, floodAllocBound>>20)
		}
	})
	t.Run("in flight per address and per user", func(t *testing.T) {
		second := env.ServiceAccountToken(t, ns, "second-creator", "create")
		url := serveRender(t, rpcauth.Guard{Authn: kube, Authz: kube, Limits: rpcauth.Limits{MaxInFlightPerClient: 1}})
		a := caller{from: "127.0.0.2", token: creator, ns: ns}.hold(t, url)
		caller{from: "127.0.0.2", token: second, ns: ns}.refused(t, url, connect.CodeResourceExhausted)  // the address
		caller{from: "127.0.0.3", token: creator, ns: ns}.refused(t, url, connect.CodeResourceExhausted) // the user
		caller{from: "127.0.0.3", token: second, ns: ns}.served(t, url)
		a.release(t)
		caller{from: "127.0.0.2", token: creator, ns: ns}.served(t, url)
	})
}
