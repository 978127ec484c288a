package svc

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestParse: the exit codes and outputs of Parse for help, command-line, LAVA_* and log
// errors, and a clean parse with the environment filling what the command line left.
func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		args               []string
		env                map[string]string
		code               int
		stop               bool
		wantStdout, stderr string
		wantURL            string
	}{
		{"help", []string{"--help"}, nil, ExitOK, true, "Usage of demo:\n", "", ""},
		{"unknown flag", []string{"--bogus"}, nil, ExitUsage, true, "", "demo: unknown flag: --bogus\nUsage of demo:\n", ""},
		{"argument", []string{"x"}, nil, ExitUsage, true, "", "demo: unexpected arguments [\"x\"]\nUsage of demo:\n", ""},
		{"bad env", nil, map[string]string{"LAVA_REPLICAS": "many"}, ExitUsage, true, "", "demo: ", ""},
		{"bad log format", []string{"--log-format", "xml"}, nil, ExitUsage, true, "", "demo: ", ""},
		{"env fills", nil, map[string]string{"LAVA_NATS_URL": "nats://h:1"}, ExitOK, false, "", "", "nats://h:1"},
		{"flag wins", []string{"--nats-url", "nats://f:1"}, map[string]string{"LAVA_NATS_URL": "nats://h:1"}, ExitOK, false, "", "", "nats://f:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var o struct {
				url, creds, metrics, health, format, level string
				replicas                                   int
			}
			fs := pflag.NewFlagSet("demo", pflag.ContinueOnError)
			Common{NATSURL: &o.url, NATSCreds: &o.creds, MetricsAddr: &o.metrics, HealthAddr: &o.health,
				LogFormat: &o.format, LogLevel: &o.level, Replicas: &o.replicas}.Register(fs)
			var stdout, stderr bytes.Buffer
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			code, stop := Parse(fs, tt.args, lookup, &stdout, &stderr, &o.format, &o.level)
			if code != tt.code || stop != tt.stop {
				t.Fatalf("Parse = %d, %v; want %d, %v (stderr %q)", code, stop, tt.code, tt.stop, stderr.String())
			}
			if !strings.HasPrefix(stdout.String(), tt.wantStdout) || (tt.wantStdout == "") != (stdout.Len() == 0) {
				t.Errorf("stdout %q, want %q...", stdout.String(), tt.wantStdout)
			}
			if !strings.HasPrefix(stderr.String(), tt.stderr) || (tt.stderr == "") != (stderr.Len() == 0) {
				t.Errorf("stderr %q, want %q...", stderr.String(), tt.stderr)
			}
			if tt.wantURL != "" && o.url != tt.wantURL {
				t.Errorf("nats-url %q, want %q", o.url, tt.wantURL)
			}
		})
	}
}
