package state

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrInvalidKey reports a namespace or name that is not a valid Kubernetes name.
var ErrInvalidKey = errors.New("state: invalid key")

var (
	// dnsLabel is a Kubernetes namespace (DNS-1123 label, at most 63 characters).
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// dnsSubdomain is a Kubernetes object name (DNS-1123 subdomain, at most 253 characters).
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// Key names the state of one LavaArchitecture: its namespace and name.
type Key struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// String returns "namespace/name", the form `lava state unlock NS/NAME` takes.
func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Validate reports whether the namespace is a DNS-1123 label and the name a DNS-1123
// subdomain; the error wraps [ErrInvalidKey].
func (k Key) Validate() error {
	if len(k.Namespace) > 63 || !dnsLabel.MatchString(k.Namespace) {
		return fmt.Errorf("%w: namespace %q is not a DNS-1123 label", ErrInvalidKey, k.Namespace)
	}
	if len(k.Name) > 253 || !dnsSubdomain.MatchString(k.Name) {
		return fmt.Errorf("%w: name %q is not a DNS-1123 subdomain", ErrInvalidKey, k.Name)
	}
	return nil
}

// ParseKey parses "namespace/name"; the error wraps [ErrInvalidKey].
func ParseKey(s string) (Key, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		return Key{}, fmt.Errorf("%w: %q is not NAMESPACE/NAME", ErrInvalidKey, s)
	}
	k := Key{Namespace: ns, Name: name}
	return k, k.Validate()
}

// token escapes a valid Kubernetes name into a KV key segment the way bus.EscapeToken does for
// such names ('.' becomes '_'; DNS-1123 names contain nothing else to escape).
func token(s string) string { return strings.ReplaceAll(s, ".", "_") }

// kvKey is the key of the current record: "state.<namespace>.<name>".
func (k Key) kvKey() string { return "state." + token(k.Namespace) + "." + token(k.Name) }

// historyKey is the key Forget leaves behind: "forgotten.<namespace>.<name>".
// lockKey is the KV key of the resource's provider dependency lock ([Store.ProviderLock]).
func (k Key) lockKey() string { return "providers." + token(k.Namespace) + "." + token(k.Name) }

func (k Key) historyKey() string { return "forgotten." + token(k.Namespace) + "." + token(k.Name) }

// replacedKey is the key Restore keeps the replaced record under: "replaced.<namespace>.<name>".
func (k Key) replacedKey() string { return ReplacedPrefix + token(k.Namespace) + "." + token(k.Name) }
