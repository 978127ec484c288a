//go:build integration

package anomaly_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// EnvAlertmanagerBin names the Alertmanager binary the tests run (built by
// `make tools-alertmanager`: github.com/prometheus/alertmanager/cmd/alertmanager v0.28.1).
const EnvAlertmanagerBin = "LAVA_ALERTMANAGER_BIN"

// alertmanager is a real Alertmanager process on a loopback port.
type alertmanager struct {
	URL string
}

// runAlertmanager starts $LAVA_ALERTMANAGER_BIN with a single null receiver, no clustering and
// its storage in a temporary directory, waits until /-/ready answers, and stops it at cleanup.
func runAlertmanager(t *testing.T) *alertmanager {
	t.Helper()
	bin := os.Getenv(EnvAlertmanagerBin)
	if bin == "" {
		t.Fatalf("%s is not set: build Alertmanager with `make tools-alertmanager` and export its path", EnvAlertmanagerBin)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s=%s: %v (build it with `make tools-alertmanager`)", EnvAlertmanagerBin, bin, err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte("route:\n  receiver: \"null\"\nreceivers:\n  - name: \"null\"\n"), 0o600); err != nil {
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
	am := &alertmanager{URL: "http://" + addr}
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
