package telemetry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lava-operator/lava/internal/platform/httpserver"
	"github.com/lava-operator/lava/internal/platform/testutil/conntest"
)

func TestNewLogger_formatsAndLevels(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "json", "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", "v")
	out := buf.String()
	if strings.Contains(out, "hidden") || !strings.Contains(out, `"msg":"shown"`) || !strings.Contains(out, `"k":"v"`) {
		t.Fatalf("unexpected log output %q", out)
	}
	if _, err := NewLogger(&buf, "xml", "info"); err == nil {
		t.Fatal("want an error for an unknown format")
	}
	if _, err := NewLogger(&buf, "text", "loud"); err == nil {
		t.Fatal("want an error for an unknown level")
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHealth_readyzFollowsChecks(t *testing.T) {
	var h Health
	failing := true
	h.AddReadyCheck("nats", func(context.Context) error {
		if failing {
			return errors.New("not connected")
		}
		return nil
	})
	base := "http://" + serve(t, h.Handler())

	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d, want 200", code)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "nats: not connected") {
		t.Fatalf("/readyz = %d %q, want 503 naming the check", code, body)
	}
	failing = false
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz = %d after the check passed, want 200", code)
	}
}

func TestMetricsHandler_servesRegistryAndLints(t *testing.T) {
	reg := NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "lava", Subsystem: "test", Name: "events_total", Help: "Events seen."})
	reg.MustRegister(c)
	c.Add(3)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Fatalf("promlint: %v", problems)
	}
	code, body := get(t, "http://"+serve(t, MetricsHandler(reg))+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, "lava_test_events_total 3") || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics = %d, body lacks the counter or the Go collector:\n%s", code, body)
	}
}

// TestServeListener_idleConnectionFlood: the metrics and health listeners hold at most
// httpserver.DefaultMaxConnsPerClient idle connections of one address (the file-descriptor
// attack), and /healthz answers another address at once.
func TestServeListener_idleConnectionFlood(t *testing.T) {
	var h Health
	addr := serve(t, h.Handler())
	conntest.Flood(t, addr, []string{"127.0.0.2"}, 3*httpserver.DefaultMaxConnsPerClient, httpserver.DefaultMaxConnsPerClient, func() {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		conntest.Serve(t, "127.0.0.1", req, http.StatusOK)
	})
}

// serve serves h with ServeListener on a loopback port until the test ends (the shutdown must
// be clean) and returns the address.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	return conntest.Listen(t, func(ctx context.Context, ln net.Listener) error { return ServeListener(ctx, ln, h) })
}
