package render

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/gowebpki/jcs"
	"lukechampine.com/blake3"

	"github.com/lava-operator/lava/internal/lang/bindingskey"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// RenderRecord identifies one render (docs/architecture.md section 4): it is a
// LavaArchitecture's status.render and part of its receipts. Digests are 64 lowercase hex
// characters of BLAKE3-256.
type RenderRecord struct {
	// SourceKind is the spec.source field rendered ("inline", "name" or "file").
	SourceKind string `json:"sourceKind"`
	// SourceDigest is [SourceDigest] of the resolved source text.
	SourceDigest string `json:"sourceDigest"`
	// BindingsDigest is [BindingsDigest] of the effective bindings.
	BindingsDigest string `json:"bindingsDigest"`
	// Gate is the interface the bindings passed ("" when none was applied).
	Gate string `json:"gate"`
	// ArchitectureName is the deflava-architecture form's name.
	ArchitectureName string `json:"architectureName"`
	// ResourceCount is the number of resources rendered (data sources not counted).
	ResourceCount int `json:"resourceCount"`
	// TerraformJSONDigest is [DigestJSON] of the rendered Terraform JSON.
	TerraformJSONDigest string `json:"terraformJSONDigest"`
	// EvaluatorVersion is [tlisp.EvaluatorVersion] of the evaluator that rendered.
	EvaluatorVersion string `json:"evaluatorVersion"`
}

// BindingsKeySize is the size in bytes of the key [BindingsDigest] needs for secret values.
const BindingsKeySize = bindingskey.Size

func hexSum(b []byte) string {
	sum := blake3.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// DigestJSON returns the lowercase hex BLAKE3-256 of the RFC 8785 (JCS) canonical form of the
// JSON document b, so two documents that differ only in key order or insignificant whitespace
// have the same digest. It fails when b is not valid JSON.
func DigestJSON(b []byte) (string, error) {
	c, err := jcs.Transform(b)
	if err != nil {
		return "", fmt.Errorf("canonicalize json: %w", err)
	}
	return hexSum(c), nil
}

// jsonDomain separates the keyed terraformJSONDigest from any other use of the key.
const jsonDomain = "lava.terraform-json-digest.v1"

// KeyedJSONDigest is [DigestJSON] keyed with the installation's 32-byte bindings key (BLAKE3
// keyed mode over a domain string, a zero byte and the RFC 8785 canonical form): the
// terraformJSONDigest of a render that has Secret-backed bindings, whose JSON holds their values,
// so the digest is no offline dictionary oracle for them. A key that is not 32 bytes is an error.
func KeyedJSONDigest(b, key []byte) (string, error) {
	if len(key) != BindingsKeySize {
		return "", fmt.Errorf("terraform json digest: secret bindings need a %d-byte key, got %d bytes", BindingsKeySize, len(key))
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return "", fmt.Errorf("canonicalize json: %w", err)
	}
	h := blake3.New(32, key)
	_, _ = h.Write([]byte(jsonDomain)) // a hash.Hash never fails to write
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(c)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// SourceDigest returns the lowercase hex BLAKE3-256 of the source text's bytes (for a bundled
// source, of the resolved .tlisp text, not of its name).
func SourceDigest(text string) string { return hexSum([]byte(text)) }

// secretDomain separates the keyed hashes of BindingsDigest from any other use of the key.
const secretDomain = "lava.bindings-digest.secret.v1"

// BindingsDigest returns the lowercase hex BLAKE3-256 of the RFC 8785 canonical JSON of b:
//
//	{"lists":{K:[...]},"records":{K:[{F:V}...]},"scalars":{K:V}}
//
// For every key in secretKeys (Secret-backed bindings, whichever kind they are) the value is
// replaced by {"secret":H}, where H is the hex of BLAKE3 keyed with key (32 bytes, the
// installation's key) over the domain, the kind, the key name and the value's canonical JSON. A
// secret value therefore never enters the digest through a plain hash, and the digest still
// changes when a secret changes. key may be nil only when no binding is secret; otherwise a
// key that is not 32 bytes is an error.
func BindingsDigest(b tlisp.Bindings, secretKeys map[string]bool, key []byte) (string, error) {
	doc := map[string]map[string]any{"scalars": {}, "lists": {}, "records": {}}
	var err error
	add := func(kind, k string, v any) {
		if err != nil {
			return
		}
		if !secretKeys[k] {
			doc[kind][k] = v
			return
		}
		var h string
		h, err = keyedDigest(key, kind, k, v)
		doc[kind][k] = map[string]string{"secret": h}
	}
	for _, k := range sortedKeys(b.Scalars) {
		add("scalars", k, b.Scalars[k])
	}
	for _, k := range sortedKeys(b.Lists) {
		l := b.Lists[k]
		if l == nil {
			l = []string{}
		}
		add("lists", k, l)
	}
	for _, k := range sortedKeys(b.Records) {
		r := b.Records[k]
		if r == nil {
			r = []map[string]string{}
		}
		add("records", k, r)
	}
	if err != nil {
		return "", err
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("bindings digest: %w", err)
	}
	return DigestJSON(raw)
}

func keyedDigest(key []byte, kind, name string, v any) (string, error) {
	if len(key) != BindingsKeySize {
		return "", fmt.Errorf("bindings digest: secret binding %q needs a %d-byte key, got %d bytes", name, BindingsKeySize, len(key))
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("bindings digest: %w", err)
	}
	c, err := jcs.Transform(raw)
	if err != nil {
		return "", fmt.Errorf("bindings digest: canonicalize: %w", err)
	}
	h := blake3.New(32, key)
	for _, part := range []string{secretDomain, kind, name} {
		_, _ = h.Write([]byte(part)) // a hash.Hash never fails to write
		_, _ = h.Write([]byte{0})
	}
	_, _ = h.Write(c)
	return hex.EncodeToString(h.Sum(nil)), nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
