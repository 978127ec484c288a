package engine

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/lava-operator/lava/internal/lang/scrub"
)

// RedactedText replaces a secret in error text.
const RedactedText = "(redacted)"

// MaxSecretBytes bounds the bytes of the secret values one object brings (the values it binds
// from Secrets, the sensitive outputs it binds, its provider credentials): every message about
// the object is redacted of their [Forms], kept in a [Redactor] at up to about 400 bytes of
// memory per byte of value (a value of control bytes: its JSON and Go escapings are six and
// four times as long, each form's automaton about 13 bytes per byte). 256 KiB holds keys,
// certificate bundles and kubeconfigs; a tenant binding 32 Secrets of 1 MiB would otherwise
// take about 12 GB of synth's memory.
const MaxSecretBytes = 256 << 10

// ErrSecretsTooLarge is wrapped by [CheckSecretBytes]'s error.
var ErrSecretsTooLarge = errors.New("secret values too large")

// CheckSecretBytes returns an error wrapping [ErrSecretsTooLarge] when values total more than
// [MaxSecretBytes] bytes; the message gives the total and the limit, never a value.
func CheckSecretBytes(values []string) error {
	total := 0
	for _, v := range values {
		total += len(v)
	}
	if total > MaxSecretBytes {
		return fmt.Errorf("%w: the secret values this object brings (Secret bindings, sensitive outputs it binds, provider credentials, sensitive values of its configuration or state) total %d bytes, more than the %d bytes Lava redacts from its messages", ErrSecretsTooLarge, total, MaxSecretBytes)
	}
	return nil
}

// Redactor scrubs secret values from text. The zero value redacts nothing. A Redactor is safe
// for concurrent use.
type Redactor struct {
	mu sync.Mutex
	// forms are the distinct forms of the secrets added, seen holds them as a set.
	forms []string
	seen  map[string]bool
	// set finds forms in text; nil after an Add until the next Redact builds it.
	set *scrub.Set
}

// NewRedactor returns a Redactor for the given secrets (empty strings are ignored).
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add adds secrets. Each secret is also added in the forms it takes when carried by other text
// ([Forms]): JSON- and Go-escaped, base64 (standard and URL alphabets, padded or not) and, for
// a multi-line secret, each of its lines of [MinLineBytes] or more. Its cost is linear in the
// size of the forms; the search structure is built once, at the next [Redactor.Redact].
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	for _, s := range secrets {
		for _, f := range Forms(s) {
			if !r.seen[f] {
				r.seen[f] = true
				r.forms = append(r.forms, f)
				r.set = nil
			}
		}
	}
}

// Len returns the number of distinct forms of the secrets added.
func (r *Redactor) Len() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.forms)
}

// MinLineBytes is the shortest line of a multi-line secret that is redacted on its own: a
// shorter line ("-----", "}") would mangle unrelated text.
const MinLineBytes = 8

// Forms returns s and the other texts that carry it: the body of its HCL quoted literal
// (as synth renders a Secret binding), the bodies of the JSON string encoding (as in a JSON
// document or a protojson message) and of the Go quoting (as %q prints it) of both, its base64 encodings (standard and URL alphabets, padded and raw: a Kubernetes Secret's
// data, a basic-auth header) and, when s has several lines, each line of at least
// [MinLineBytes] bytes (a PEM key printed one line at a time). Empty s has no forms.
func Forms(s string) []string {
	if s == "" {
		return nil
	}
	out := []string{s}
	seen := map[string]bool{s: true}
	add := func(f string) {
		if f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	// s, and s as the body of an HCL quoted literal (how synth renders a Secret binding:
	// render.SensitiveTemplate; tofu quotes the configuration line in some errors), each also
	// as the body of its JSON string and of its Go quoting.
	hcl := string(hclwrite.TokensForValue(cty.StringVal(s)).Bytes())
	for _, f := range []string{s, hcl[1 : len(hcl)-1]} {
		add(f)
		if b, err := json.Marshal(f); err == nil {
			add(string(b[1 : len(b)-1]))
		}
		q := strconv.Quote(f)
		add(q[1 : len(q)-1])
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		add(enc.EncodeToString([]byte(s)))
	}
	if strings.ContainsAny(s, "\r\n") {
		for line := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
			if line = strings.TrimSpace(line); len(line) >= MinLineBytes {
				add(line)
			}
		}
	}
	return out
}

// Redact returns s with every secret replaced by [RedactedText]: every byte that an occurrence
// of any form of any secret covers is hidden, so a secret that contains or overlaps another is
// hidden whole, and overlapping or adjacent occurrences become one [RedactedText]. One pass over
// s ([scrub.Set]), whatever the number of secrets.
func (r *Redactor) Redact(s string) string {
	if r == nil {
		return s
	}
	r.mu.Lock()
	if r.set == nil && len(r.forms) > 0 {
		r.set = scrub.Strings(r.forms...)
	}
	set := r.set
	r.mu.Unlock()
	return set.Replace(s, RedactedText)
}

// Tail returns at most max bytes from the end of s, starting at a line boundary when one is
// near, with surrounding blank space trimmed.
func Tail(s string, max int) string {
	s = strings.TrimSpace(s)
	if len(s) <= max {
		return s
	}
	s = s[len(s)-max:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < max/2 {
		s = s[i+1:]
	}
	return "…" + strings.TrimSpace(s)
}
