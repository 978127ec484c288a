//go:build integration

package natsauth_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/natsauth"
)

// serverConf turns the NATS chart values into the server configuration the NATS chart renders
// from them, by the rules its values.yaml documents: config.merge merged into the top level,
// config.jetstream.merge into the jetstream block, JSON, and strings "<< X >>" written unquoted.
// Only the network and store settings of this test are added.
func serverConf(t *testing.T, v map[string]any, port int, storeDir string, encrypt bool) string {
	t.Helper()
	js := map[string]any{"store_dir": storeDir}
	if encrypt {
		for k, x := range dig(t, v, "config", "jetstream", "merge").(map[string]any) {
			js[k] = x
		}
	}
	conf := map[string]any{"host": "127.0.0.1", "port": port, "jetstream": js}
	for k, x := range dig(t, v, "config", "merge").(map[string]any) {
		conf[k] = x
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(conf); err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`"<< (.*?) >>"`).ReplaceAllString(b.String(), "$1")
}

// TestEncryptionAtRest: a real nats-server binary started with the configuration the NATS chart
// renders from the generated values (the key in the variable the chart sets from its Secret)
// runs JetStream encrypted: a known payload is stored, the server restarts and returns it, and
// no file of the store holds it in plaintext. The same run without the cipher finds the payload
// in the store files (the check can fail).
func TestEncryptionAtRest(t *testing.T) {
	t.Parallel()
	bin := os.Getenv("LAVA_NATS_SERVER_BIN")
	if bin == "" {
		t.Fatal("LAVA_NATS_SERVER_BIN is not set: run through make (make tools-nats builds nats-server)")
	}
	dir := t.TempDir()
	keys, err := natsauth.GenerateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	v := chartValues(t, keys)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	marker := "lava-plaintext-marker-" + hex.EncodeToString(key[:8])
	for _, encrypt := range []bool{true, false} {
		t.Run("encrypt="+strconv.FormatBool(encrypt), func(t *testing.T) {
			store := t.TempDir()
			port := freePort(t)
			confFile := filepath.Join(t.TempDir(), "nats.conf")
			if err := os.WriteFile(confFile, []byte(serverConf(t, v, port, store, encrypt)), 0o600); err != nil {
				t.Fatal(err)
			}
			var serverLog bytes.Buffer
			start := func() *exec.Cmd {
				cmd := exec.Command(bin, "-c", confFile)
				cmd.Env = append(os.Environ(), natsauth.DefaultKeyEnv+"="+hex.EncodeToString(key))
				cmd.Stderr = &serverLog
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
				return cmd
			}
			connect := func() jetstream.JetStream {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for {
					nc, js, err := bus.Connect(bus.ConnectOptions{URL: "nats://127.0.0.1:" + strconv.Itoa(port), Identity: bus.IdentityBootstrap,
						NKeyFile: filepath.Join(dir, natsauth.SeedFileName(bus.IdentityBootstrap))})
					if err == nil {
						t.Cleanup(nc.Close)
						return js
					}
					if time.Now().After(deadline) {
						t.Fatalf("connect as bootstrap: %v\nnats-server: %s", err, serverLog.String())
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			cmd := start()
			js := connect()
			ctx := t.Context()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LAVA_ENCRYPTION_TEST", Subjects: []string{"lava.test.>"}}); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := js.Publish(ctx, "lava.test.x", []byte(marker)); err != nil {
					t.Fatal(err)
				}
			}
			_ = cmd.Process.Signal(os.Interrupt) // a clean shutdown flushes the store
			_ = cmd.Wait()

			found := false
			err := filepath.WalkDir(store, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				if bytes.Contains(b, []byte(marker)) {
					found = true
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if encrypt && found {
				t.Fatal("the payload is in the store files in plaintext: JetStream is not encrypted at rest")
			}
			if !encrypt {
				if !found {
					t.Fatal("without the cipher the payload was not found in the store files: the check cannot fail")
				}
				return
			}
			// Restarted with the key from the environment, the server reads its store back.
			start()
			js = connect()
			s, err := js.Stream(ctx, "LAVA_ENCRYPTION_TEST")
			if err != nil {
				t.Fatal(err)
			}
			m, err := s.GetMsg(ctx, 3)
			if err != nil || string(m.Data) != marker {
				t.Fatalf("after restart: message 3 = %v, %v", m, err)
			}
		})
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
