package anomaly_test

import (
	"crypto/hmac"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-openapi/strfmt"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/service/anomaly"
)

func detected() *lavav1.AnomalyDetected {
	a, _ := anomaly.FromFailed(&lavav1.Failed{Envelope: env("infra", "vpc"), Stage: lavav1.Stage_STAGE_APPLY, Reason: "ApplyFailed", Message: "boom"}, "c1", now)
	p := a.Proto()
	p.Envelope = &lavav1.Envelope{EventId: "ev-1", Source: "anomaly", Resource: p.GetSource()}
	p.LastSeen = timestamppb.New(now.Add(time.Minute))
	return p
}

func keyFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWebhookSink_signsAndRetries(t *testing.T) {
	t.Parallel()
	key, err := anomaly.ReadKeyFile(keyFile(t, "k3y-material\n"))
	if err != nil || string(key) != "k3y-material" {
		t.Fatalf("key %q, %v", key, err)
	}
	var calls atomic.Int32
	got := make(chan *lavav1.AnomalyDetected, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if calls.Add(1) < 3 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		if !hmac.Equal([]byte(r.Header.Get(anomaly.HeaderSignature)), []byte(anomaly.Sign([]byte("k3y-material"), body))) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if r.Header.Get("Lava-Schema") != "lava.v1.AnomalyDetected" || r.Header.Get(anomaly.HeaderEventID) != "ev-1" {
			http.Error(w, "headers", http.StatusBadRequest)
			return
		}
		a := &lavav1.AnomalyDetected{}
		if err := protojson.Unmarshal(body, a); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- a
	}))
	t.Cleanup(srv.Close)
	var retries atomic.Int32
	s := anomaly.NewWebhookSink(anomaly.SinkConfig{Name: "ops", URL: srv.URL, MaxAttempts: 5, Timeout: metav1.Duration{Duration: time.Second}},
		key, func(string) { retries.Add(1) })
	if err := s.Send(t.Context(), detected()); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.GetKind() != lavav1.AnomalyKind_ANOMALY_KIND_APPLY_FAILURE || calls.Load() != 3 || retries.Load() != 2 {
		t.Errorf("kind %v after %d calls, %d retries", a.GetKind(), calls.Load(), retries.Load())
	}
}

func TestWebhookSink_boundedAndPermanent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status    int
		calls     int32
		permanent bool
	}{{http.StatusBadGateway, 3, false}, {http.StatusUnauthorized, 1, true}, {http.StatusTooManyRequests, 3, false}} {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			calls.Add(1)
			w.WriteHeader(tt.status)
		}))
		s := anomaly.NewWebhookSink(anomaly.SinkConfig{Name: "ops", URL: srv.URL, MaxAttempts: 3}, nil, nil)
		err := s.Send(t.Context(), detected())
		srv.Close()
		if err == nil || errors.Is(err, anomaly.ErrPermanent) != tt.permanent || calls.Load() != tt.calls {
			t.Errorf("status %d: err %v after %d calls; want permanent=%v after %d", tt.status, err, calls.Load(), tt.permanent, tt.calls)
		}
	}
}

func TestAlertmanagerSink_alert(t *testing.T) {
	t.Parallel()
	s := anomaly.NewAlertmanagerSink(anomaly.SinkConfig{Name: "am", URL: "http://am:9093/", GeneratorURL: "http://lava.test/{namespace}/{name}?fp={fingerprint}",
		ResolveAfter: metav1.Duration{Duration: 10 * time.Minute}}, nil)
	d := detected()
	al, err := s.Alert(d)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"alertname": "LavaApplyFailure", "severity": "critical", "kind": "apply_failure", "namespace": "infra", "name": "vpc",
		"resource": "infra/vpc", "cluster": "c1"}
	b, _ := json.Marshal(al.Labels)
	wb, _ := json.Marshal(want)
	if string(b) != string(wb) {
		t.Errorf("labels %s, want %s", b, wb)
	}
	if !time.Time(al.StartsAt).Equal(now) || !time.Time(al.EndsAt).Equal(now.Add(11*time.Minute)) || al.Annotations["description"] != d.GetMessage() ||
		al.GeneratorURL != strfmt.URI("http://lava.test/infra/vpc?fp="+d.GetFingerprint()) || al.Annotations["summary"] == "" {
		t.Errorf("alert %+v", al)
	}
	// An escalation tier carries its tier and team; nothing else of the metadata enters.
	d.Metadata = map[string]string{"escalation_tier": "1", "escalation_team": "platform-oncall", "drift_event_id": "e1"}
	al, err = s.Alert(d)
	if err != nil {
		t.Fatal(err)
	}
	if al.Labels["tier"] != "1" || al.Labels["team"] != "platform-oncall" || al.Labels["drift_event_id"] != "" || al.Annotations["drift_event_id"] != "" {
		t.Errorf("escalation labels %v, annotations %v", al.Labels, al.Annotations)
	}
}
