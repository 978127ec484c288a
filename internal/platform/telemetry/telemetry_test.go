package telemetry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ServeListener(ctx, ln, h.Handler()) }()
	base := "http://" + ln.Addr().String()

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
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
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
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = ServeListener(ctx, ln, MetricsHandler(reg)) }()
	code, body := get(t, "http://"+ln.Addr().String()+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, "lava_test_events_total 3") || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics = %d, body lacks the counter or the Go collector:\n%s", code, body)
	}
}
