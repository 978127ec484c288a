package anomaly

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-openapi/strfmt"
	"github.com/prometheus/alertmanager/api/v2/models"
	"google.golang.org/protobuf/encoding/protojson"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// Sink delivers an anomaly somewhere.
type Sink interface {
	// Name is the sink's configured name ("bus" for the bus sink).
	Name() string
	// Send delivers a. An error wrapping [ErrPermanent] will not succeed on a retry; any other
	// error may.
	Send(ctx context.Context, a *lavav1.AnomalyDetected) error
}

// ErrPermanent marks a delivery no retry can fix (the receiver rejected the request with a
// 4xx other than 408 and 429).
var ErrPermanent = errors.New("anomaly: permanent delivery failure")

// BusSink publishes on lava.anomaly.<severity>.<kind> (stream LAVA_ANOMALIES) as protojson
// with the Lava-Schema header, the public alerting contract; the envelope's event id is the
// Nats-Msg-Id, so a repeated delivery of one window's alert is stored once.
type BusSink struct {
	pub *bus.Publisher
}

// NewBusSink returns the bus sink publishing with pub.
func NewBusSink(pub *bus.Publisher) *BusSink { return &BusSink{pub: pub} }

// Name implements [Sink].
func (*BusSink) Name() string { return SinkBus }

// Send implements [Sink].
func (s *BusSink) Send(ctx context.Context, a *lavav1.AnomalyDetected) error {
	if _, err := s.pub.PublishEvent(ctx, a); err != nil {
		return fmt.Errorf("anomaly: bus sink: %w", err)
	}
	return nil
}

// Header names of the webhook sink.
const (
	// HeaderSignature is "sha256=" and the lowercase hex HMAC-SHA256 of the body under the
	// sink's key.
	HeaderSignature = "X-Lava-Signature"
	// HeaderEventID carries the anomaly's envelope.event_id (receivers de-duplicate on it).
	HeaderEventID = "X-Lava-Event-Id"
)

// Sign is the X-Lava-Signature value of body under key: "sha256=<hex HMAC-SHA256>".
func Sign(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// ReadKeyFile reads an HMAC key file: its bytes with one trailing newline (LF or CRLF)
// removed. An empty key is an error.
func ReadKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("anomaly: read key: %w", err)
	}
	b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(b) == 0 {
		return nil, fmt.Errorf("anomaly: key file %s is empty", path)
	}
	return b, nil
}

// poster POSTs JSON with bounded retries.
type poster struct {
	client      *http.Client
	maxAttempts int
	backoffBase time.Duration
	backoffMax  time.Duration
	onAttempt   func(result string)
}

// retryable reports whether an HTTP status may succeed on a retry.
func retryable(code int) bool {
	return code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout
}

// post sends body to u, retrying connection errors, timeouts and retryable statuses up to
// maxAttempts times with exponential backoff and jitter.
func (p *poster) post(ctx context.Context, u string, body []byte, header http.Header) error {
	var last error
	delay := p.backoffBase
	for attempt := 1; attempt <= p.maxAttempts; attempt++ {
		if attempt > 1 {
			d := time.Duration(float64(delay) * (0.8 + 0.4*rand.Float64()))
			select {
			case <-ctx.Done():
				return fmt.Errorf("anomaly: post: %w (last: %w)", ctx.Err(), last)
			case <-time.After(d):
			}
			delay = min(2*delay, p.backoffMax)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("%w: build request: %w", ErrPermanent, err)
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := p.client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("anomaly: post: %w", ctx.Err())
			}
			last = fmt.Errorf("anomaly: post: %w", redactURLError(err))
			p.onAttempt("retry")
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			return nil
		case retryable(resp.StatusCode):
			last = fmt.Errorf("anomaly: post: status %d", resp.StatusCode)
			p.onAttempt("retry")
		default:
			return fmt.Errorf("%w: status %d", ErrPermanent, resp.StatusCode)
		}
	}
	return fmt.Errorf("anomaly: post: gave up after %d attempts: %w", p.maxAttempts, last)
}

// redactURLError drops the URL (it may carry a token in its query or user info) from a
// client error.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// WebhookSink POSTs the anomaly as protojson (the same body as the bus) to a URL, with the
// headers Content-Type application/json, Lava-Schema lava.v1.AnomalyDetected, X-Lava-Event-Id
// and, when a key is configured, X-Lava-Signature ([Sign]).
type WebhookSink struct {
	name string
	url  string
	key  []byte
	p    poster
}

// NewWebhookSink returns the webhook sink of cfg; key may be nil (unsigned). onAttempt
// (optional) is called with "retry" for each failed attempt that will be retried.
func NewWebhookSink(cfg SinkConfig, key []byte, onAttempt func(string)) *WebhookSink {
	return &WebhookSink{name: cfg.Name, url: cfg.URL, key: key, p: newPoster(cfg, onAttempt)}
}

func newPoster(cfg SinkConfig, onAttempt func(string)) poster {
	if onAttempt == nil {
		onAttempt = func(string) {}
	}
	timeout := cfg.Timeout.Duration
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return poster{client: &http.Client{Timeout: timeout}, maxAttempts: max(cfg.MaxAttempts, 1),
		backoffBase: 500 * time.Millisecond, backoffMax: 10 * time.Second, onAttempt: onAttempt}
}

// Name implements [Sink].
func (s *WebhookSink) Name() string { return s.name }

// Send implements [Sink].
func (s *WebhookSink) Send(ctx context.Context, a *lavav1.AnomalyDetected) error {
	body, err := protojson.Marshal(a)
	if err != nil {
		return fmt.Errorf("%w: marshal: %w", ErrPermanent, err)
	}
	h := http.Header{}
	h.Set("Content-Type", bus.ContentTypeJSON)
	h.Set(bus.HeaderSchema, string(a.ProtoReflect().Descriptor().FullName()))
	h.Set(HeaderEventID, a.GetEnvelope().GetEventId())
	h.Set("User-Agent", "lava-anomaly")
	if len(s.key) > 0 {
		h.Set(HeaderSignature, Sign(s.key, body))
	}
	if err := s.p.post(ctx, s.url, body, h); err != nil {
		return fmt.Errorf("webhook %s: %w", s.name, err)
	}
	return nil
}

// AlertmanagerSink POSTs each anomaly as one alert to Alertmanager's v2 API.
type AlertmanagerSink struct {
	name         string
	url          string
	generator    string
	resolveAfter time.Duration
	p            poster
}

// NewAlertmanagerSink returns the Alertmanager sink of cfg (cfg.URL is the base URL).
func NewAlertmanagerSink(cfg SinkConfig, onAttempt func(string)) *AlertmanagerSink {
	return &AlertmanagerSink{name: cfg.Name, url: strings.TrimSuffix(cfg.URL, "/") + "/api/v2/alerts",
		generator: cfg.GeneratorURL, resolveAfter: cfg.ResolveAfter.Duration, p: newPoster(cfg, onAttempt)}
}

// Name implements [Sink].
func (s *AlertmanagerSink) Name() string { return s.name }

// Alert labels besides alertname, severity, kind, namespace, name and cluster.
const (
	// LabelResource is "<namespace>/<name>" of the LavaArchitecture.
	LabelResource = "resource"
	// LabelTier is the escalation tier (from 0) of an Escalate anomaly (metadata
	// escalation_tier).
	LabelTier = "tier"
	// LabelTeam is the escalation tier's team (RemediationPolicy
	// spec.escalation.tiers[].team, metadata escalation_team), else the LavaArchitecture's
	// own label "team" when it has one.
	LabelTeam = "team"
)

// Alert is the Alertmanager alert of a, in the v2 API's model (github.com/prometheus/
// alertmanager api/v2/models): labels alertname ("Lava" + kind, "LavaApplyFailure"),
// severity, kind (the subject token), namespace, name, resource ("<namespace>/<name>"),
// cluster (when set), team (the escalation tier's, else the resource's label "team") and for
// an escalation tier tier; annotations summary,
// description (the sanitized message), fingerprint and count; startsAt the first sighting,
// endsAt the last sighting plus resolveAfter; generatorURL from the template. No other
// metadata enters the alert. The error wraps [ErrPermanent] for an anomaly that is no valid
// alert.
func (s *AlertmanagerSink) Alert(a *lavav1.AnomalyDetected) (*models.PostableAlert, error) {
	kind, ok := KindOf(a.GetKind())
	if !ok {
		return nil, fmt.Errorf("%w: kind %v", ErrPermanent, a.GetKind())
	}
	sev, _ := SeverityOf(a.GetSeverity())
	tok, err := bus.AnomalyKindToken(a.GetKind(), a.GetExtensionKind())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	src := a.GetSource()
	labels := models.LabelSet{
		"alertname":   "Lava" + string(kind),
		"severity":    string(sev),
		"kind":        tok,
		"namespace":   src.GetNamespace(),
		"name":        src.GetName(),
		LabelResource: src.GetNamespace() + "/" + src.GetName(),
	}
	if a.GetCluster() != "" {
		labels["cluster"] = a.GetCluster()
	}
	if t, ok := a.GetMetadata()["escalation_tier"]; ok {
		labels[LabelTier] = t
	}
	if t := a.GetMetadata()["escalation_team"]; t != "" {
		labels[LabelTeam] = t
	} else if t := a.GetLabels()[LabelTeam]; t != "" {
		labels[LabelTeam] = t
	}
	al := &models.PostableAlert{
		Alert: models.Alert{Labels: labels},
		Annotations: models.LabelSet{
			"summary":     fmt.Sprintf("%s %s on %s/%s", sev, kind, src.GetNamespace(), src.GetName()),
			"description": a.GetMessage(),
			"fingerprint": a.GetFingerprint(),
			"count":       fmt.Sprint(max(a.GetCount(), 1)),
		},
		StartsAt: strfmt.DateTime(a.GetFirstSeen().AsTime().UTC()),
		EndsAt:   strfmt.DateTime(a.GetLastSeen().AsTime().UTC().Add(s.resolveAfter)),
	}
	if s.generator != "" {
		al.GeneratorURL = strfmt.URI(strings.NewReplacer("{namespace}", url.PathEscape(src.GetNamespace()), "{name}",
			url.PathEscape(src.GetName()), "{fingerprint}", a.GetFingerprint()).Replace(s.generator))
	}
	if err := al.Validate(strfmt.Default); err != nil {
		return nil, fmt.Errorf("%w: alert: %w", ErrPermanent, err)
	}
	return al, nil
}

// Send implements [Sink].
func (s *AlertmanagerSink) Send(ctx context.Context, a *lavav1.AnomalyDetected) error {
	al, err := s.Alert(a)
	if err != nil {
		return err
	}
	body, err := json.Marshal(models.PostableAlerts{al})
	if err != nil {
		return fmt.Errorf("%w: marshal: %w", ErrPermanent, err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "lava-anomaly")
	if err := s.p.post(ctx, s.url, body, h); err != nil {
		return fmt.Errorf("alertmanager %s: %w", s.name, err)
	}
	return nil
}
