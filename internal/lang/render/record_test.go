package render

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"lukechampine.com/blake3"

	"github.com/lava-operator/lava/internal/lang/tlisp"
)

func TestDigestJSON_independentOfKeyOrderAndWhitespace(t *testing.T) {
	t.Parallel()
	a := []byte(`{"resource":{"aws_vpc":{"main":{"cidr_block":"10.0.0.0/16","tags":{"Name":"x","Env":"y"}}}},"provider":{"aws":{"region":"us-east-1"}}}`)
	b := []byte("{\n  \"provider\": {\"aws\": {\"region\": \"us-east-1\"}},\n  \"resource\": {\"aws_vpc\": {\"main\": {\"tags\": {\"Env\": \"y\", \"Name\": \"x\"}, \"cidr_block\": \"10.0.0.0/16\"}}}\n}\n")
	c := []byte(`{"resource":{"aws_vpc":{"main":{"cidr_block":"10.0.0.0/17","tags":{"Name":"x","Env":"y"}}}},"provider":{"aws":{"region":"us-east-1"}}}`)
	da, err := DigestJSON(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := DigestJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := DigestJSON(c)
	if err != nil {
		t.Fatal(err)
	}
	if da != db {
		t.Errorf("reordered document: %s != %s", da, db)
	}
	if da == dc {
		t.Error("different documents share a digest")
	}
	if len(da) != 64 || strings.ToLower(da) != da {
		t.Errorf("digest %q is not 64 lowercase hex characters", da)
	}
	if _, err := DigestJSON([]byte(`{"a":`)); err == nil {
		t.Error("invalid JSON digested without error")
	}
	// The digest is BLAKE3-256 of the canonical form.
	sum := blake3.Sum256([]byte(`{"a":1,"b":[true,null]}`))
	if d, _ := DigestJSON([]byte(`{ "b": [true, null], "a": 1.0 }`)); d != hex.EncodeToString(sum[:]) {
		t.Errorf("digest %s is not BLAKE3 of the RFC 8785 form", d)
	}
}

func TestSourceDigest(t *testing.T) {
	t.Parallel()
	sum := blake3.Sum256([]byte("(deflava-architecture a :resources ())"))
	if got := SourceDigest("(deflava-architecture a :resources ())"); got != hex.EncodeToString(sum[:]) {
		t.Errorf("SourceDigest = %s", got)
	}
	if SourceDigest("a") == SourceDigest("b") {
		t.Error("different sources share a digest")
	}
}

func TestBindingsDigest(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{7}, BindingsKeySize)
	base := tlisp.Bindings{
		Scalars: map[string]string{"name": "prod", "password": "hunter2"},
		Lists:   map[string][]string{"azs": {"a", "b"}},
		Records: map[string][]map[string]string{"repos": {{"slug": "x"}}},
	}
	secret := map[string]bool{"password": true}
	d1, err := BindingsDigest(base, secret, key)
	if err != nil {
		t.Fatal(err)
	}
	// Map iteration order cannot matter; rebuilding gives the same digest.
	d1b, _ := BindingsDigest(tlisp.Bindings{
		Records: map[string][]map[string]string{"repos": {{"slug": "x"}}},
		Lists:   map[string][]string{"azs": {"a", "b"}},
		Scalars: map[string]string{"password": "hunter2", "name": "prod"},
	}, secret, key)
	if d1 != d1b {
		t.Error("digest depends on construction order")
	}
	changed := func(mut func(*tlisp.Bindings)) string {
		b := tlisp.Bindings{Scalars: map[string]string{}, Lists: base.Lists, Records: base.Records}
		for k, v := range base.Scalars {
			b.Scalars[k] = v
		}
		mut(&b)
		d, err := BindingsDigest(b, secret, key)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if changed(func(b *tlisp.Bindings) { b.Scalars["password"] = "other" }) == d1 {
		t.Error("changing a secret does not change the digest")
	}
	if changed(func(b *tlisp.Bindings) { b.Lists = map[string][]string{"azs": {"b", "a"}} }) == d1 {
		t.Error("list order does not change the digest")
	}
	// The key matters for secret values: a different installation key gives another digest.
	if d, _ := BindingsDigest(base, secret, bytes.Repeat([]byte{8}, BindingsKeySize)); d == d1 {
		t.Error("the installation key does not enter the digest")
	}
	// Without secrets the key is irrelevant and may be nil.
	if _, err := BindingsDigest(base, nil, nil); err != nil {
		t.Errorf("no secrets, nil key: %v", err)
	}
	// A secret needs a 32-byte key.
	if _, err := BindingsDigest(base, secret, []byte("short")); err == nil {
		t.Error("short key accepted")
	}
	if _, err := BindingsDigest(base, secret, nil); err == nil {
		t.Error("nil key accepted for a secret")
	}
	// The digest equals the documented canonical document with the keyed hash in place of the
	// secret, and no plain hash of the secret appears in it.
	h, err := keyedDigest(key, "scalars", "password", "hunter2")
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"lists":{"azs":["a","b"]},"records":{"repos":[{"slug":"x"}]},"scalars":{"name":"prod","password":{"secret":"` + h + `"}}}`
	if want, _ := DigestJSON([]byte(doc)); want != d1 {
		t.Errorf("digest %s does not match the documented document %s", d1, doc)
	}
	plain := blake3.Sum256([]byte("hunter2"))
	if h == hex.EncodeToString(plain[:]) || strings.Contains(doc, "hunter2") {
		t.Error("secret value enters through a plain hash")
	}
}

func TestRenderRecord_jsonTags(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(RenderRecord{SourceKind: "inline", ResourceCount: 2, EvaluatorVersion: tlisp.EvaluatorVersion})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"sourceKind":"inline","sourceDigest":"","bindingsDigest":"","gate":"","architectureName":"","resourceCount":2,"terraformJSONDigest":"","evaluatorVersion":"lava-go/0.1 (lava-eval 0.2 semantics)"}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
