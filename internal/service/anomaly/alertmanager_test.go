//go:build integration

package anomaly_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvAlertmanagerBin names the Alertmanager binary the tests run (built by
// `make tools-alertmanager`: github.com/prometheus/alertmanager/cmd/alertmanager v0.28.1).
const EnvAlertmanagerBin = "LAVA_ALERTMANAGER_BIN"

// alertmanager is a real Alertmanager process on a loopback port, whose receivers are webhooks
// on a loopback recorder.
type alertmanager struct {
	URL string

	mu         sync.Mutex
	deliveries []amDelivery
}

// amDelivery is one notification Alertmanager's webhook receiver POSTed: the receiver (the
// path) and the body (Alertmanager's webhook payload, version 4).
type amDelivery struct {
	Receiver string
	Body     []byte
	Payload  amWebhookMessage
}

// amWebhookMessage is the part of Alertmanager's webhook payload the tests read (its
// documented "version 4" JSON).
type amWebhookMessage struct {
	Version  string `json:"version"`
	Receiver string `json:"receiver"`
	Status   string `json:"status"`
	Alerts   []struct {
		Status      string            `json:"status"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"alerts"`
	CommonLabels map[string]string `json:"commonLabels"`
}

// delivered returns the notifications received so far.
func (a *alertmanager) delivered() []amDelivery {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.deliveries)
}

// alertmanagerConfig routes alerts whose team label is platform-oncall to the receiver
// "oncall", everything else to "default"; both are webhooks to the recorder at base. The
// grouping waits are short so a test sees a notification within a second or two. It is the
// shape of the webhook receiver docs/alerting.md documents.
const alertmanagerConfig = `route:
  receiver: default
  group_by: [alertname, resource]
  group_wait: 200ms
  group_interval: 1s
  repeat_interval: 1h
  routes:
    - matchers: ['team="platform-oncall"']
      receiver: oncall
receivers:
  - name: default
    webhook_configs:
      - url: %s/default
        send_resolved: false
  - name: oncall
    webhook_configs:
      - url: %s/oncall
        send_resolved: false
`

// runAlertmanager starts $LAVA_ALERTMANAGER_BIN with [alertmanagerConfig] (webhook receivers
// on a loopback recorder), no clustering and its storage in a temporary directory, waits until
// /-/ready answers, and stops it at cleanup.
func runAlertmanager(t *testing.T) *alertmanager {
	t.Helper()
	bin := os.Getenv(EnvAlertmanagerBin)
	if bin == "" {
		t.Fatalf("%s is not set: build Alertmanager with `make tools-alertmanager` and export its path", EnvAlertmanagerBin)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s=%s: %v (build it with `make tools-alertmanager`)", EnvAlertmanagerBin, bin, err)
	}
	am := &alertmanager{}
	recorder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		d := amDelivery{Receiver: strings.TrimPrefix(r.URL.Path, "/"), Body: body}
		if err == nil {
			err = json.Unmarshal(body, &d.Payload)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		am.mu.Lock()
		am.deliveries = append(am.deliveries, d)
		am.mu.Unlock()
	}))
	t.Cleanup(recorder.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(alertmanagerConfig, recorder.URL, recorder.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--cluster.listen-address=", "--log.level=warn")
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start alertmanager: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
	})
	am.URL = "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(am.URL + "/-/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return am
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Fatalf("alertmanager not ready on %s: %v\n%s", addr, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gettableAlert is the part of Alertmanager's GET /api/v2/alerts elements the tests read.
type gettableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Status       struct {
		State string `json:"state"`
	} `json:"status"`
}

// alerts returns the alerts Alertmanager holds.
func (a *alertmanager) alerts(t *testing.T) ([]gettableAlert, error) {
	t.Helper()
	resp, err := http.Get(a.URL + "/api/v2/alerts")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v2/alerts: %s", resp.Status)
	}
	var out []gettableAlert
	return out, json.NewDecoder(resp.Body).Decode(&out)
}
