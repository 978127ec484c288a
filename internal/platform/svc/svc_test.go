package svc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
			var o Common
			fs := pflag.NewFlagSet("demo", pflag.ContinueOnError)
			o.Register(fs)
			var stdout, stderr bytes.Buffer
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			code, stop := Parse(fs, tt.args, lookup, &stdout, &stderr, &o.LogFormat, &o.LogLevel)
			if code != tt.code || stop != tt.stop {
				t.Fatalf("Parse = %d, %v; want %d, %v (stderr %q)", code, stop, tt.code, tt.stop, stderr.String())
			}
			if !strings.HasPrefix(stdout.String(), tt.wantStdout) || (tt.wantStdout == "") != (stdout.Len() == 0) {
				t.Errorf("stdout %q, want %q...", stdout.String(), tt.wantStdout)
			}
			if !strings.HasPrefix(stderr.String(), tt.stderr) || (tt.stderr == "") != (stderr.Len() == 0) {
				t.Errorf("stderr %q, want %q...", stderr.String(), tt.stderr)
			}
			if tt.wantURL != "" && o.NATS.URL != tt.wantURL {
				t.Errorf("nats-url %q, want %q", o.NATS.URL, tt.wantURL)
			}
		})
	}
}

// demoOptions is a service options type: Common plus one flag, with a Complete that requires
// it.
type demoOptions struct {
	Common
	Want string
}

func (o *demoOptions) Flags(fs *pflag.FlagSet) { fs.StringVar(&o.Want, "want", "", "what run returns") }

func (o *demoOptions) Complete() error {
	if o.Want == "" {
		return BadUsage(errors.New("--want is required"))
	}
	return nil
}

// TestCommand: the exit code and output of a binary built by Command for a Complete usage
// error (2, with the usage), a run usage error (2), a run failure (1), a run cancelled while
// starting (0) and a clean run (0), with the common options parsed and Stderr set.
func TestCommand(t *testing.T) {
	t.Parallel()
	var got demoOptions
	run := Command("demo", func(ctx context.Context, o demoOptions) error {
		got = o
		switch o.Want {
		case "usage":
			return BadUsage(errors.New("bad routing"))
		case "fail":
			return errors.New("broken")
		case "cancelled":
			return fmt.Errorf("start: %w", context.Canceled)
		}
		return nil
	})
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tt := range []struct {
		name   string
		ctx    context.Context
		args   []string
		code   int
		stderr string
	}{
		{"complete usage error", t.Context(), nil, ExitUsage, "demo: --want is required\nUsage of demo:\n"},
		{"run usage error", t.Context(), []string{"--want", "usage"}, ExitUsage, "demo: bad routing\n"},
		{"run failure", t.Context(), []string{"--want", "fail"}, ExitRuntime, "demo: broken\n"},
		{"cancelled while starting", cancelled, []string{"--want", "cancelled"}, ExitOK, ""},
		{"not cancelled", t.Context(), []string{"--want", "cancelled"}, ExitRuntime, "demo: start: context canceled\n"},
		{"clean", t.Context(), []string{"--want", "ok", "--nats-url", "nats://h:1"}, ExitOK, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tt.ctx, tt.args, func(string) (string, bool) { return "", false }, &stdout, &stderr)
		if code != tt.code || !strings.HasPrefix(stderr.String(), tt.stderr) || (tt.stderr == "") != (stderr.Len() == 0) {
			t.Errorf("%s: exit %d, stderr %q; want %d, %q...", tt.name, code, stderr.String(), tt.code, tt.stderr)
		}
	}
	if got.NATS.URL != "nats://h:1" || got.Stderr == nil || got.LogFormat != "json" || got.Replicas != 1 {
		t.Errorf("run got Common %+v", got.Common)
	}
}
