package pipeline

import (
	"regexp"
	"unicode/utf8"
)

// Redacted replaces a secret value in anomaly text (the same text the engines use).
const Redacted = "(redacted)"

// MaxMessageBytes bounds an anomaly message and each metadata value (the Kubernetes Event note
// limit is 1 KiB).
const MaxMessageBytes = 1024

// secretPatterns match secret-looking values that a redacting publisher might have missed:
// key=value and key: value pairs whose key names a credential, bearer tokens, URL user info,
// private key blocks and AWS access key ids.
var secretPatterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)`), Redacted},
	{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}`), "$1 " + Redacted},
	{regexp.MustCompile(`(?i)((?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret|credentials?|auth)["']?\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;&"']+)`), "${1}" + Redacted},
	{regexp.MustCompile(`://[^/\s:@]+:[^/\s@]+@`), "://" + Redacted + "@"},
	{regexp.MustCompile(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`), Redacted},
}

// Sanitize returns s with secret-looking values replaced by [Redacted], cut to
// [MaxMessageBytes] on a rune boundary. Publishers already redact the secrets they know
// (binding values, sensitive outputs); this is the anomaly boundary's second line, so no
// anomaly payload, webhook body, alert or Kubernetes Event carries one.
func Sanitize(s string) string {
	for _, p := range secretPatterns {
		s = p.re.ReplaceAllString(s, p.repl)
	}
	if len(s) > MaxMessageBytes {
		cut := MaxMessageBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}
