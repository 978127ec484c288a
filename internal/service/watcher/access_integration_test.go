//go:build integration

package watcher_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/service/watcher"
)

// testAccess: a watcher whose identity may not list what it watches stops at start with an
// error naming the user, the verb, the resource and the namespace (before the check,
// controller-runtime's manager waited for the refused list for ever: `lava up --kubeconfig
// --once --timeout` never ended); and a manager stopped before its caches synced returns
// (controller-runtime v0.25's wait for the caches does not end with its context; without
// stopSafeCache it spun until the process ended).
func (e *env) testAccess(t *testing.T) {
	ns := e.kube.Namespace(t)
	rc := rest.CopyConfig(e.kube.Config)
	rc.Impersonate = rest.ImpersonationConfig{UserName: "nobody"}
	newWatcher := func() *watcher.Watcher {
		w, err := watcher.New(t.Context(), watcher.Config{
			RESTConfig: rc, Scheme: e.kube.Scheme, JetStream: e.js, Namespaces: []string{ns}, ControllerName: "access-" + ns,
			PhaseConsumer: "watcher-access-" + ns,
		})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	start := time.Now()
	err := newWatcher().Start(t.Context())
	want := `user "nobody" may not list lavaarchitectures.lava.pleme.io in namespace "` + ns + `"`
	if !errors.Is(err, identity.ErrAccessRefused) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Start: %v; want an error wrapping identity.ErrAccessRefused with %q", err, want)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("refused after %v", took)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- newWatcher().StartManagerForTest(ctx) }()
	time.Sleep(2 * time.Second) // the informers' lists are refused: the caches never sync
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the manager did not stop within 30s of its context's end")
	}
}
