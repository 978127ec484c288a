package bus

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidToken reports a string that [EscapeToken] cannot have produced.
var ErrInvalidToken = errors.New("bus: invalid escaped token")

// emptyToken is the escape of the empty string. No other escape is a lone "=", because every
// other "=" is followed by two hex digits.
const emptyToken = "="

const hexDigits = "0123456789abcdef"

// literal reports whether b stands for itself in an escaped token.
func literal(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-'
}

// EscapeToken turns any string into one NATS subject token that is also a valid KV key segment,
// reversibly (see [UnescapeToken]); no two strings share a token. The rules, byte by byte (a
// public contract, docs/events.md):
//
//   - ASCII letters, digits and '-' stand for themselves;
//   - '.' becomes '_' (so a Kubernetes name "web.prod" reads as "web_prod");
//   - every other byte, '_' and '=' included, becomes '=' and two lowercase hex digits
//     ("_" is "=5f", "*" is "=2a", ">" is "=3e", a space is "=20", "é" is "=c3=a9");
//   - the empty string becomes "=".
//
// The result is never empty, contains only [-0-9A-Za-z_=], and is as long as the input for
// every valid Kubernetes namespace or name (DNS-1123: lowercase alphanumerics, '-' and '.').
func EscapeToken(s string) string {
	if s == "" {
		return emptyToken
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if literal(s[i]) || s[i] == '.' {
			n++
		} else {
			n += 3
		}
	}
	var b strings.Builder
	b.Grow(n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case literal(c):
			b.WriteByte(c)
		case c == '.':
			b.WriteByte('_')
		default:
			b.WriteByte('=')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0x0f])
		}
	}
	return b.String()
}

// UnescapeToken is the inverse of [EscapeToken]. It accepts exactly the strings EscapeToken
// produces (canonical escapes only: lowercase hex, no escape of a byte that has a literal form)
// and returns an error wrapping [ErrInvalidToken] for anything else, so that
// UnescapeToken(t) == s if and only if EscapeToken(s) == t.
func UnescapeToken(t string) (string, error) {
	if t == emptyToken {
		return "", nil
	}
	if t == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidToken)
	}
	var b strings.Builder
	b.Grow(len(t))
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case literal(c):
			b.WriteByte(c)
		case c == '_':
			b.WriteByte('.')
		case c == '=':
			if i+2 >= len(t) {
				return "", fmt.Errorf("%w: %q: truncated escape at byte %d", ErrInvalidToken, t, i)
			}
			hi, ok1 := unhex(t[i+1])
			lo, ok2 := unhex(t[i+2])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("%w: %q: bad escape at byte %d", ErrInvalidToken, t, i)
			}
			v := hi<<4 | lo
			if literal(v) || v == '.' {
				return "", fmt.Errorf("%w: %q: non-canonical escape at byte %d", ErrInvalidToken, t, i)
			}
			b.WriteByte(v)
			i += 2
		default:
			return "", fmt.Errorf("%w: %q: byte %d (%q) is not allowed", ErrInvalidToken, t, i, c)
		}
	}
	return b.String(), nil
}

// unhex decodes one lowercase hex digit.
func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// ResourceKey is the KV key of a resource in lava-state, lava-leases and lava-drift-schedule:
// EscapeToken(namespace) + "." + EscapeToken(name), e.g. "infra.prod-vpc" or
// "infra.web_prod" for name "web.prod". Valid in every bucket (charset [-/_=.a-zA-Z0-9], no
// empty segment) and collision-free; [ParseResourceKey] inverts it.
func ResourceKey(namespace, name string) string {
	return EscapeToken(namespace) + "." + EscapeToken(name)
}

// ParseResourceKey inverts [ResourceKey]. Errors wrap [ErrInvalidToken].
func ParseResourceKey(key string) (namespace, name string, err error) {
	parts := strings.Split(key, ".")
	if len(parts) != 2 {
		return "", "", fmt.Errorf("%w: resource key %q has %d segments, want 2", ErrInvalidToken, key, len(parts))
	}
	return unescapePair(parts[0], parts[1])
}

// WatermarkKey is the key of a service's watermark for a resource in lava-watermarks:
// service + "." + [ResourceKey](namespace, name), e.g. "applier.infra.prod-vpc". service is one
// of the [Services] names (never escaped: those are fixed lowercase words).
func WatermarkKey(service, namespace, name string) string {
	return service + "." + ResourceKey(namespace, name)
}

func unescapePair(a, b string) (string, string, error) {
	x, err := UnescapeToken(a)
	if err != nil {
		return "", "", err
	}
	y, err := UnescapeToken(b)
	if err != nil {
		return "", "", err
	}
	return x, y, nil
}

// isWord reports whether s is a fixed vocabulary token: lowercase snake case, [a-z][a-z0-9_]*.
func isWord(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
