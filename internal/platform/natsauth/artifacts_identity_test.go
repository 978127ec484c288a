package natsauth_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/bus"
)

// TestPermissions_artifactsRefreshAndCollectAsServices: under the generated permissions, synth
// and the applier put new content and refresh content already stored (PutBytes and Put:
// a compare-and-set rewrite of the object's meta message), and the applier collects (lists the
// meta subjects from the stream's info, deletes with a compare-and-set delete marker and
// purges); what each put reads back whole.
func TestPermissions_artifactsRefreshAndCollectAsServices(t *testing.T) {
	a := startAuthorized(t)
	ctx := t.Context()
	for _, svc := range []string{bus.ServiceSynth, bus.ServiceApplier} {
		_, js := a.connect(t, svc)
		art, err := bus.NewArtifacts(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte("as "+svc+" "), 20000)
		d, err := art.PutBytes(ctx, data)
		if err != nil {
			t.Fatalf("%s PutBytes: %v", svc, err)
		}
		if _, err := art.PutBytes(ctx, data); err != nil {
			t.Fatalf("%s PutBytes refresh: %v", svc, err)
		}
		if _, err := art.Put(ctx, bytes.NewReader(data)); err != nil {
			t.Fatalf("%s Put refresh: %v", svc, err)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rc, err := art.Get(rctx, d)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		_ = rc.Close()
		cancel()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: read back %d bytes, %v", svc, len(got), err)
		}
	}
	_, js := a.connect(t, bus.ServiceApplier)
	art, err := bus.NewArtifacts(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	res, err := art.Collect(ctx, bus.CollectOptions{MinAge: -time.Hour})
	if err != nil {
		t.Fatalf("applier Collect: %v", err)
	}
	if res.Deleted != 2 {
		t.Errorf("collected %+v, want both artifacts deleted", res)
	}
	if ok, err := art.Has(ctx, bus.Digest(bytes.Repeat([]byte("as synth "), 20000))); ok || err != nil {
		t.Errorf("after the collection Has = %v, %v; want false", ok, err)
	}
}
