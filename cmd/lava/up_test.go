package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/manifest"
	"github.com/lava-operator/lava/internal/up"
)

func TestUpSummary(t *testing.T) {
	t.Parallel()
	applied := v1alpha1.LavaArchitecture{}
	applied.Status.Phase = v1alpha1.PhaseApplied
	failed := v1alpha1.LavaArchitecture{}
	failed.Status.Phase = v1alpha1.PhaseFailed
	fe := &manifest.FileError{File: "x.yaml", Err: errors.New("bad")}
	tests := []struct {
		res  up.Result
		want string
	}{
		{up.Result{}, "lava up: 0 resources settled"},
		{up.Result{Objects: []v1alpha1.LavaArchitecture{applied}}, "lava up: 1 resource settled: 1 Applied"},
		{up.Result{Objects: []v1alpha1.LavaArchitecture{applied, failed, applied}}, "lava up: 3 resources settled: 2 Applied, 1 Failed"},
		{up.Result{FileErrors: []*manifest.FileError{fe}}, "lava up: 0 resources settled; 1 manifest file unreadable"},
		{up.Result{FileErrors: []*manifest.FileError{fe, fe}}, "lava up: 0 resources settled; 2 manifest files unreadable"},
	}
	for _, tt := range tests {
		if got := summary(tt.res); got != tt.want {
			t.Errorf("summary = %q, want %q", got, tt.want)
		}
	}
}

// TestUpOnce_unreadableManifest: a manifest that cannot be parsed is invalid input (exit 1),
// even though nothing is left to settle.
func TestUpOnce_unreadableManifest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runLava(t, "", "up", "--once", "-f", dir, "--state-dir", filepath.Join(t.TempDir(), "s"),
		"--providers", t.TempDir(), "--file-root", filepath.Join(t.TempDir(), "files"), "--timeout", "1m", "--interval", "100ms")
	if code != exitInvalid {
		t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitInvalid, stdout, stderr)
	}
	if !strings.Contains(stdout, "1 manifest file unreadable") || !strings.Contains(stderr, "1 manifest file unreadable") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}
