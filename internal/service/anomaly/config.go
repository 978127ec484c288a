package anomaly

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Sink types of [SinkConfig].Type.
const (
	SinkWebhook          = "webhook"
	SinkAlertmanager     = "alertmanager"
	SinkKubernetesEvents = "kubernetesEvents"
	// SinkBus is the name of the always-on sink: the lava.anomaly.<severity>.<kind> subjects.
	// It needs no configuration and rules cannot turn it off.
	SinkBus = "bus"
)

// DefaultWindow is the de-duplication window when the configuration sets none.
const DefaultWindow = 10 * time.Minute

// Routing is the anomaly service's routing configuration, read from the YAML or JSON file
// given by --config ([LoadRouting]). The zero value publishes only on the bus.
//
//	window: 10m            # de-duplication window per fingerprint
//	stuckAfter: 30m        # progress deadline of a working phase (negative: off)
//	approvalAfter: 24h     # a plan held for approval this long is an anomaly (negative: off)
//	cluster: prod-eu       # names the cluster in every anomaly
//	sinks:
//	  - name: ops
//	    type: webhook       # webhook | alertmanager | kubernetesEvents
//	    url: https://hooks.example/lava
//	    secretFile: /etc/lava/webhook/key
//	rules:                 # in order; the first match wins unless it says continue: true
//	  - name: critical-prod
//	    match: {severities: [critical], namespaces: [prod], labels: {team: infra}}
//	    sinks: [ops]
type Routing struct {
	// Window is the de-duplication window (default [DefaultWindow]).
	Window metav1.Duration `json:"window"`
	// StuckAfter is the progress deadline: a resource that stays this long in a working phase
	// (Pending, Synthesized, Planned, Reconverging, Finalizing; not while held by dependencies,
	// suspension or an approval) raises a Stalled anomaly. Default [DefaultStuckAfter]; a
	// negative value disables the check.
	StuckAfter metav1.Duration `json:"stuckAfter"`
	// ApprovalAfter is how long a plan may wait for approval (AwaitingApproval) before it
	// raises the Custom anomaly approval_overdue, once per held plan. Default
	// [DefaultApprovalAfter]; a negative value disables it.
	ApprovalAfter metav1.Duration `json:"approvalAfter"`
	// Cluster names the cluster in every anomaly this service builds.
	Cluster string `json:"cluster,omitempty"`
	// Sinks are the configured sinks, by unique name.
	Sinks []SinkConfig `json:"sinks,omitempty"`
	// Rules route anomalies to sinks ([Routing.Route]).
	Rules []Rule `json:"rules,omitempty"`
}

// SinkConfig is one sink.
type SinkConfig struct {
	// Name is how rules refer to the sink (unique, not "bus").
	Name string `json:"name"`
	// Type is [SinkWebhook], [SinkAlertmanager] or [SinkKubernetesEvents].
	Type string `json:"type"`
	// URL is the webhook's URL, or the Alertmanager's base URL ("http://alertmanager:9093";
	// the sink POSTs to URL + "/api/v2/alerts").
	URL string `json:"url,omitempty"`
	// SecretFile holds the webhook's HMAC-SHA256 key (the file's bytes, one trailing newline
	// ignored; mount it from a Secret). Empty sends the webhook unsigned.
	SecretFile string `json:"secretFile,omitempty"`
	// Timeout bounds one HTTP attempt (default 10s).
	Timeout metav1.Duration `json:"timeout,omitempty"`
	// MaxAttempts bounds HTTP attempts per delivery (default 5); 5xx, 429, timeouts and
	// connection errors are retried with exponential backoff from 500ms, capped at 10s.
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// GeneratorURL is the Alertmanager alert's generatorURL; "{namespace}", "{name}" and
	// "{fingerprint}" are replaced (path-escaped). Empty leaves it out.
	GeneratorURL string `json:"generatorURL,omitempty"`
	// ResolveAfter sets the Alertmanager alert's endsAt to last sighting + ResolveAfter
	// (default the window).
	ResolveAfter metav1.Duration `json:"resolveAfter,omitempty"`
}

// Rule routes the anomalies it matches to sinks.
type Rule struct {
	// Name identifies the rule in logs.
	Name string `json:"name,omitempty"`
	// Match selects anomalies; the empty match selects every anomaly.
	Match Match `json:"match,omitempty"`
	// Sinks are sink names.
	Sinks []string `json:"sinks"`
	// Continue goes on to the later rules after a match (all matches route); without it the
	// first matching rule is the last one evaluated.
	Continue bool `json:"continue,omitempty"`
}

// Match is a conjunction: every non-empty field must match.
type Match struct {
	// Kinds: the anomaly's kind is one of these (PascalCase, "ApplyFailure"); for Custom,
	// the extension kind may be listed too.
	Kinds []string `json:"kinds,omitempty"`
	// Severities: the anomaly's severity is one of these (cosmetic, functional, critical).
	Severities []Severity `json:"severities,omitempty"`
	// MinSeverity: the anomaly's severity is at least this one.
	MinSeverity Severity `json:"minSeverity,omitempty"`
	// Namespaces: the resource's namespace is one of these.
	Namespaces []string `json:"namespaces,omitempty"`
	// Labels: the resource has every one of these labels with this value.
	Labels map[string]string `json:"labels,omitempty"`
}

func severityRank(s Severity) int { return int(s.Proto()) }

// Matches reports whether m selects a.
func (m Match) Matches(a LavaAnomaly) bool {
	if len(m.Kinds) > 0 && !slices.Contains(m.Kinds, string(a.Kind)) &&
		(a.Kind != KindCustom || !slices.Contains(m.Kinds, a.ExtensionKind)) {
		return false
	}
	if len(m.Severities) > 0 && !slices.Contains(m.Severities, a.Severity) {
		return false
	}
	if m.MinSeverity != "" && severityRank(a.Severity) < severityRank(m.MinSeverity) {
		return false
	}
	if len(m.Namespaces) > 0 && !slices.Contains(m.Namespaces, a.Source.Namespace) {
		return false
	}
	for k, v := range m.Labels {
		if got, ok := a.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Route is the names of the configured sinks a goes to, in first-mention order without
// repeats: the rules are evaluated in order, the sinks of each matching rule are taken, and
// evaluation stops at the first matching rule unless that rule has continue: true. The bus
// sink is not listed: it always receives the anomaly.
func (c *Routing) Route(a LavaAnomaly) []string {
	var out []string
	for _, r := range c.Rules {
		if !r.Match.Matches(a) {
			continue
		}
		for _, s := range r.Sinks {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		if !r.Continue {
			break
		}
	}
	return out
}

// ErrConfig reports an invalid configuration.
var ErrConfig = errors.New("anomaly: invalid config")

// Validate fills defaults and checks names, types, URLs and rule references. Errors wrap
// [ErrConfig].
func (c *Routing) Validate() error {
	if c.Window.Duration <= 0 {
		c.Window.Duration = DefaultWindow
	}
	if c.StuckAfter.Duration == 0 {
		c.StuckAfter.Duration = DefaultStuckAfter
	}
	if c.ApprovalAfter.Duration == 0 {
		c.ApprovalAfter.Duration = DefaultApprovalAfter
	}
	names := map[string]bool{}
	for i := range c.Sinks {
		s := &c.Sinks[i]
		switch {
		case s.Name == "" || s.Name == SinkBus:
			return fmt.Errorf("%w: sink %d: name %q (required, not %q)", ErrConfig, i, s.Name, SinkBus)
		case names[s.Name]:
			return fmt.Errorf("%w: sink %q defined twice", ErrConfig, s.Name)
		}
		names[s.Name] = true
		switch s.Type {
		case SinkWebhook, SinkAlertmanager:
			if s.URL == "" {
				return fmt.Errorf("%w: sink %q: url is required", ErrConfig, s.Name)
			}
		case SinkKubernetesEvents:
		default:
			return fmt.Errorf("%w: sink %q: type %q (want %s, %s or %s)", ErrConfig, s.Name, s.Type,
				SinkWebhook, SinkAlertmanager, SinkKubernetesEvents)
		}
		if s.Timeout.Duration <= 0 {
			s.Timeout.Duration = 10 * time.Second
		}
		if s.MaxAttempts <= 0 {
			s.MaxAttempts = 5
		}
		if s.ResolveAfter.Duration <= 0 {
			s.ResolveAfter.Duration = c.Window.Duration
		}
	}
	for i, r := range c.Rules {
		if len(r.Sinks) == 0 {
			return fmt.Errorf("%w: rule %d (%s): no sinks", ErrConfig, i, r.Name)
		}
		for _, s := range r.Sinks {
			if !names[s] {
				return fmt.Errorf("%w: rule %d (%s): unknown sink %q", ErrConfig, i, r.Name, s)
			}
		}
		for _, sev := range append(slices.Clone(r.Match.Severities), r.Match.MinSeverity) {
			if sev != "" && sev.Proto() == 0 {
				return fmt.Errorf("%w: rule %d (%s): severity %q", ErrConfig, i, r.Name, sev)
			}
		}
	}
	return nil
}

// ParseRouting decodes a YAML or JSON configuration strictly (unknown fields are errors) and
// validates it.
func ParseRouting(b []byte) (*Routing, error) {
	c := &Routing{}
	if err := yaml.UnmarshalStrict(b, c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// LoadRouting reads and parses the file at path; an empty path is the zero configuration (bus
// only, default window).
func LoadRouting(path string) (*Routing, error) {
	if path == "" {
		c := &Routing{}
		return c, c.Validate()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("anomaly: read config: %w", err)
	}
	return ParseRouting(b)
}
