package anomaly

import (
	"context"
	"fmt"
	"strconv"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// Values of the Kubernetes Events the events sink creates.
const (
	// EventReportingController is the events' reportingController.
	EventReportingController = "lava.pleme.io/anomaly"
	// EventAction is the events' action.
	EventAction = "AnomalyDetected"
)

// KubeEventsSink creates an events.k8s.io/v1 Event on the LavaArchitecture for each anomaly:
// type Warning (Normal for cosmetic), reason the kind ("ApplyFailure"), action
// AnomalyDetected, note the message with severity and fingerprint. The event's name is
// derived from the resource name, the fingerprint and the window's opening time, so a redelivery
// finds it already there (AlreadyExists counts as delivered). RBAC: events create and patch.
type KubeEventsSink struct {
	name     string
	client   kubernetes.Interface
	instance string
}

// NewKubeEventsSink returns the events sink of cfg; instance is the events'
// reportingInstance (the pod name).
func NewKubeEventsSink(cfg SinkConfig, client kubernetes.Interface, instance string) *KubeEventsSink {
	if instance == "" {
		instance = "lava-anomaly"
	}
	return &KubeEventsSink{name: cfg.Name, client: client, instance: truncate(instance, 128)}
}

// Name implements [Sink].
func (s *KubeEventsSink) Name() string { return s.name }

// EventName is the name of the Event of a window's alert: "<resource name>.<first 16
// fingerprint digits>.<window opening, Unix seconds>" (the resource name cut to keep it within
// 253 characters).
func EventName(resourceName, fingerprint string, opened int64) string {
	fp := fingerprint
	if len(fp) > 16 {
		fp = fp[:16]
	}
	return truncate(resourceName, 200) + "." + fp + "." + strconv.FormatInt(opened, 10)
}

// Event is the Event s creates for a (named after its first sighting, the window's opening).
func (s *KubeEventsSink) Event(a *lavav1.AnomalyDetected) *eventsv1.Event {
	src := a.GetSource()
	kind, _ := KindOf(a.GetKind())
	sev, _ := SeverityOf(a.GetSeverity())
	typ := corev1.EventTypeWarning
	if sev == SeverityCosmetic {
		typ = corev1.EventTypeNormal
	}
	reason := string(kind)
	if kind == KindCustom && a.GetExtensionKind() != "" {
		reason = "Custom_" + a.GetExtensionKind()
	}
	note := fmt.Sprintf("%s (severity %s, fingerprint %s)", a.GetMessage(), sev, a.GetFingerprint())
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      EventName(src.GetName(), a.GetFingerprint(), a.GetFirstSeen().AsTime().Unix()),
			Namespace: src.GetNamespace(),
			Labels:    map[string]string{"app.kubernetes.io/managed-by": "lava", "lava.pleme.io/anomaly-kind": truncate(snake(string(kind))+suffix(a.GetExtensionKind()), 63)},
		},
		EventTime:           metav1.NewMicroTime(a.GetFirstSeen().AsTime()),
		ReportingController: EventReportingController,
		ReportingInstance:   s.instance,
		Action:              EventAction,
		Reason:              truncate(reason, 128),
		Regarding: corev1.ObjectReference{
			APIVersion: v1alpha1.GroupVersion.String(),
			Kind:       "LavaArchitecture",
			Namespace:  src.GetNamespace(),
			Name:       src.GetName(),
			UID:        types.UID(src.GetUid()),
		},
		Note: truncate(note, 1024),
		Type: typ,
	}
}

// Send implements [Sink].
func (s *KubeEventsSink) Send(ctx context.Context, a *lavav1.AnomalyDetected) error {
	ev := s.Event(a)
	_, err := s.client.EventsV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsForbidden(err):
		return fmt.Errorf("%w: events %s: create: %w", ErrPermanent, s.name, err)
	}
	return fmt.Errorf("anomaly: events %s: create: %w", s.name, err)
}

func suffix(ext string) string {
	if ext == "" {
		return ""
	}
	return "." + ext
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
