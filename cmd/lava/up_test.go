package main

import (
	"errors"
	"testing"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/up"
)

func TestUpSummary(t *testing.T) {
	t.Parallel()
	applied := v1alpha1.LavaArchitecture{}
	applied.Status.Phase = v1alpha1.PhaseApplied
	failed := v1alpha1.LavaArchitecture{}
	failed.Status.Phase = v1alpha1.PhaseFailed
	fe := &up.FileError{File: "x.yaml", Err: errors.New("bad")}
	tests := []struct {
		res  up.Result
		want string
	}{
		{up.Result{}, "lava up: 0 resources settled"},
		{up.Result{Objects: []v1alpha1.LavaArchitecture{applied}}, "lava up: 1 resource settled: 1 Applied"},
		{up.Result{Objects: []v1alpha1.LavaArchitecture{applied, failed, applied}}, "lava up: 3 resources settled: 2 Applied, 1 Failed"},
		{up.Result{FileErrors: []*up.FileError{fe}}, "lava up: 0 resources settled; 1 manifest file unreadable"},
		{up.Result{FileErrors: []*up.FileError{fe, fe}}, "lava up: 0 resources settled; 2 manifest files unreadable"},
	}
	for _, tt := range tests {
		if got := summary(tt.res); got != tt.want {
			t.Errorf("summary = %q, want %q", got, tt.want)
		}
	}
}
