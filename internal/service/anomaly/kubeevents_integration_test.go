//go:build integration

package anomaly_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/service/anomaly"
)

// An anomaly routed to the kubernetesEvents sink appears as a Warning Event on the
// LavaArchitecture (real kube-apiserver), once per window, without secrets.
func TestService_kubernetesEventsOnTheResource(t *testing.T) {
	kube := kubetest.Start(t)
	ctx := t.Context()
	if err := kube.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "infra"}}); err != nil {
		t.Fatal(err)
	}
	obj := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web.prod"},
		Spec: v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Name: "aws-vpc-network"}}}
	if err := kube.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}

	ns := natstest.RunJetStream(t)
	js := ns.JetStream()
	if err := bus.EnsureTopology(ctx, js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	routing, err := anomaly.ParseRouting([]byte("sinks: [{name: events, type: kubernetesEvents}]\nrules: [{sinks: [events]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := anomaly.New(ctx, anomaly.Config{JS: js, Routing: routing, Kube: cs, Instance: "anomaly-0"})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	uid := string(obj.UID)
	pub := bus.NewPublisher(js)
	for attempt := range 2 {
		f := &lavav1.Failed{Stage: lavav1.Stage_STAGE_DESTROY, Reason: "DestroyFailed", Attempt: int32(attempt + 1),
			Message: "destroy: api_key=sk_live_0123456789 rejected"}
		f.Envelope = &lavav1.Envelope{EventId: eventid.ID(uid, 1, "lava.v1.Failed", fmt.Sprintf("cause:%d", attempt)), Source: "applier",
			Resource: &lavav1.ResourceRef{Namespace: "infra", Name: "web.prod", Uid: uid}, Generation: 1}
		if _, err := pub.PublishEvent(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := anomaly.FromFailed(&lavav1.Failed{Envelope: &lavav1.Envelope{Resource: &lavav1.ResourceRef{Namespace: "infra", Name: "web.prod", Uid: uid}},
		Stage: lavav1.Stage_STAGE_DESTROY, Reason: "DestroyFailed"}, "", time.Now())
	eventually(t, "window counts both failures", func() error {
		w, err := svc.Windows().Get(ctx, want.Fingerprint)
		if err != nil || w == nil || w.Count != 2 || len(w.Delivered) != 2 {
			return fmt.Errorf("window %+v, %v", w, err)
		}
		return nil
	})

	// The core/v1 view, as `kubectl describe` shows it: events regarding the object's uid.
	var evs *corev1.EventList
	eventually(t, "event on the resource", func() error {
		evs, err = cs.CoreV1().Events("infra").List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", uid).String()})
		if err != nil {
			return err
		}
		if len(evs.Items) == 0 {
			return fmt.Errorf("no events")
		}
		return nil
	})
	if len(evs.Items) != 1 {
		t.Fatalf("%d events, want 1 per window: %v", len(evs.Items), evs.Items)
	}
	e := evs.Items[0]
	if e.Type != corev1.EventTypeWarning || e.Reason != "DestroyFailure" || e.Action != anomaly.EventAction ||
		e.ReportingController != anomaly.EventReportingController || e.ReportingInstance != "anomaly-0" ||
		e.InvolvedObject.Kind != "LavaArchitecture" || e.InvolvedObject.Name != "web.prod" ||
		!strings.Contains(e.Message, want.Fingerprint) || !strings.Contains(e.Message, "DestroyFailed") {
		t.Errorf("event %+v", e)
	}
	if strings.Contains(e.Message, "sk_live_0123456789") {
		t.Errorf("event carries the secret: %s", e.Message)
	}
}
