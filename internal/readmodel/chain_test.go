package readmodel_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"
	"lukechampine.com/blake3"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/readmodel"
	"github.com/lava-operator/lava/internal/readmodel/receipttest"
)

// buildChain builds a chain of n outcome receipts one millisecond apart.
func buildChain(t testing.TB, n int, signer *readmodel.Signer) []*lavav1.Receipt {
	t.Helper()
	var chain []*lavav1.Receipt
	var head *lavav1.Receipt
	for i := range n {
		phase := receipttest.Lifecycle[i%len(receipttest.Lifecycle)]
		r, err := readmodel.NewReceipt(head, readmodel.KindOutcome, receipttest.Outcome("infra", "vpc", phase, i), receipttest.T0.Add(time.Duration(i)*time.Millisecond), signer)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, r)
		head = r
	}
	return chain
}

func clone(chain []*lavav1.Receipt) []*lavav1.Receipt {
	out := make([]*lavav1.Receipt, len(chain))
	for i, r := range chain {
		out[i] = proto.Clone(r).(*lavav1.Receipt)
	}
	return out
}

// TestContentHash_deterministicAndDistinct: the same receipt hashes the same; any field change
// changes the hash (upstream: hash deterministic/distinct).
func TestContentHash_deterministicAndDistinct(t *testing.T) {
	t.Parallel()
	r := buildChain(t, 1, nil)[0]
	h1, err := readmodel.ContentHash(r)
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := readmodel.ContentHash(proto.Clone(r).(*lavav1.Receipt))
	if !bytes.Equal(h1, h2) || !bytes.Equal(h1, r.GetContentHash()) {
		t.Fatalf("hash not deterministic: %x %x %x", h1, h2, r.GetContentHash())
	}
	mutations := map[string]func(r *lavav1.Receipt){
		"sequence":  func(r *lavav1.Receipt) { r.Sequence++ },
		"timestamp": func(r *lavav1.Receipt) { r.Timestamp = timestamppb.New(receipttest.T0.Add(time.Nanosecond)) },
		"kind":      func(r *lavav1.Receipt) { r.Kind = readmodel.KindAnomaly },
		"prevHash":  func(r *lavav1.Receipt) { r.PrevHash[31] = 1 },
		"phase":     func(r *lavav1.Receipt) { r.GetPayload().GetOutcome().Phase = lavav1.Phase_PHASE_FAILED },
		"diagnostic": func(r *lavav1.Receipt) {
			r.GetPayload().GetOutcome().Diagnostics = append(r.GetPayload().GetOutcome().Diagnostics, "x")
		},
		"changeSummary set": func(r *lavav1.Receipt) {
			r.GetPayload().GetOutcome().ChangeSummary = &lavav1.ChangeSummary{}
		},
		"uid": func(r *lavav1.Receipt) { r.GetPayload().GetOutcome().Resource.Uid = "other" },
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := proto.Clone(r).(*lavav1.Receipt)
			mutate(m)
			h, err := readmodel.ContentHash(m)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(h, h1) {
				t.Fatalf("hash unchanged after changing %s", name)
			}
		})
	}
}

// TestCanonical_v1 pins the canonical encoding of one receipt byte for byte (the contract of
// docs/design/0002-receipt-encoding.md) and its hash.
func TestCanonical_v1(t *testing.T) {
	t.Parallel()
	r := &lavav1.Receipt{
		Sequence: 3, Timestamp: timestamppb.New(receipttest.T0), Kind: readmodel.KindOutcome, PrevHash: readmodel.Genesis(),
		EncodingVersion: readmodel.EncodingV1,
		Payload: &lavav1.ReceiptPayload{Kind: &lavav1.ReceiptPayload_Outcome{Outcome: &lavav1.OutcomePayload{
			Resource: &lavav1.ResourceRef{Namespace: "infra", Name: "web.prod", Uid: "u-1"}, Generation: 7,
			Phase: lavav1.Phase_PHASE_APPLIED, Reason: "Applied", PlanId: "p", ChangeSummary: &lavav1.ChangeSummary{Add: 1},
			Diagnostics: []string{"<ok> & \"done\""}, EventId: "e",
		}}},
	}
	got, err := readmodel.Canonical(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"lava.outcome","payload":{"outcome":{"changeSummary":{"add":1,"change":0,"destroy":0},` +
		`"diagnostics":["<ok> & \"done\""],"eventId":"e","generation":"7","phase":"PHASE_APPLIED","planId":"p",` +
		`"reason":"Applied","resource":{"name":"web.prod","namespace":"infra","uid":"u-1"},"sourceDigest":"",` +
		`"terraformJsonDigest":""}},"prevHash":"` + strings.Repeat("0", 64) + `","sequence":"3",` +
		`"timestamp":"2026-11-30T01:02:03.400000000Z","v":1}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Fatalf("canonical encoding (-want +got):\n%s", diff)
	}
	h, _ := readmodel.ContentHash(r)
	sum := blake3.Sum256([]byte(want))
	if !bytes.Equal(h, sum[:]) {
		t.Fatalf("content hash %x is not BLAKE3 of the canonical encoding %x", h, sum)
	}
	r.EncodingVersion = 2
	if _, err := readmodel.Canonical(r); err == nil {
		t.Fatal("encoding_version 2 accepted")
	}
}

// TestCanonical_anomaly: the anomaly payload encodes every field, so changing any changes the
// hash, and the anomaly hash is BLAKE3 of the deterministic protobuf.
func TestCanonical_anomaly(t *testing.T) {
	t.Parallel()
	a := receipttest.Anomaly("infra", "vpc", 1)
	p, err := readmodel.AnomalyFromDetected(a)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(a)
	sum := blake3.Sum256(b)
	if !bytes.Equal(p.GetAnomaly().GetAnomalyHash(), sum[:]) {
		t.Fatal("anomaly hash is not BLAKE3 of the deterministic protobuf encoding")
	}
	r, err := readmodel.NewReceipt(nil, readmodel.KindAnomaly, p, receipttest.T0, nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := readmodel.Canonical(r)
	for _, want := range []string{`"kind":"ANOMALY_KIND_APPLY_FAILURE"`, `"severity":"SEVERITY_CRITICAL"`,
		`"fingerprint":"` + strings.Repeat("f", 64) + `"`, `"message":"apply failed"`, `"metadata":{"stage":"apply"}`,
		`"count":"1"`, `"action":"REMEDIATION_ACTION_REQUIRE_APPROVAL"`} {
		if !strings.Contains(string(enc), want) {
			t.Errorf("canonical anomaly encoding lacks %s:\n%s", want, enc)
		}
	}
	m := proto.Clone(r).(*lavav1.Receipt)
	m.GetPayload().GetAnomaly().GetAnomaly().Metadata["stage"] = "plan"
	if res := readmodel.Verify([]*lavav1.Receipt{m}, readmodel.VerifyOptions{}); res.OK() {
		t.Fatal("tampered anomaly metadata verified")
	}
	if _, err := readmodel.NewReceipt(nil, readmodel.KindOutcome, p, receipttest.T0, nil); err == nil {
		t.Fatal("an anomaly payload was accepted for kind lava.outcome")
	}
}

// TestGenesis: genesis is 32 zero bytes, 64 lowercase hex zeros; hashes are 64 lowercase hex
// digits and round-trip through ParseHash.
func TestGenesis(t *testing.T) {
	t.Parallel()
	if g := readmodel.Genesis(); len(g) != 32 || !bytes.Equal(g, make([]byte, 32)) {
		t.Fatalf("genesis %x", g)
	}
	if got := readmodel.Hex(readmodel.Genesis()); got != strings.Repeat("0", 64) {
		t.Fatalf("genesis hex %q", got)
	}
	h := buildChain(t, 1, nil)[0].GetContentHash()
	s := readmodel.Hex(h)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(s) {
		t.Fatalf("hash hex %q is not 64 lowercase hex digits", s)
	}
	back, err := readmodel.ParseHash(strings.ToUpper(s) + "\n")
	if err != nil || !bytes.Equal(back, h) {
		t.Fatalf("ParseHash round trip: %x %v", back, err)
	}
	for _, bad := range []string{"", "zz", strings.Repeat("0", 62), strings.Repeat("0", 66)} {
		if _, err := readmodel.ParseHash(bad); err == nil {
			t.Errorf("ParseHash(%q) accepted", bad)
		}
	}
}

// TestNewReceipt_firstAndLinks: the first append is sequence 0 with the genesis prev hash and
// kind lava.outcome; each next one links to the previous content hash; unsigned receipts carry
// algo "none" (upstream: first append, links via prev hash, no-signing -> none).
func TestNewReceipt_firstAndLinks(t *testing.T) {
	t.Parallel()
	chain := buildChain(t, 3, nil)
	first := chain[0]
	if first.GetSequence() != 0 || !bytes.Equal(first.GetPrevHash(), readmodel.Genesis()) || first.GetKind() != readmodel.KindOutcome {
		t.Fatalf("first receipt: sequence %d prev %x kind %q", first.GetSequence(), first.GetPrevHash(), first.GetKind())
	}
	for i := 1; i < len(chain); i++ {
		if chain[i].GetSequence() != uint64(i) || !bytes.Equal(chain[i].GetPrevHash(), chain[i-1].GetContentHash()) {
			t.Fatalf("receipt %d: sequence %d, prev %x, previous hash %x", i, chain[i].GetSequence(), chain[i].GetPrevHash(), chain[i-1].GetContentHash())
		}
	}
	for _, r := range chain {
		if diff := cmp.Diff(&lavav1.Signature{Algo: readmodel.AlgoNone}, r.GetSignature(), protocmp.Transform()); diff != "" {
			t.Fatalf("unsigned signature (-want +got):\n%s", diff)
		}
	}
	if res := readmodel.Verify(chain, readmodel.VerifyOptions{}); !res.OK() {
		t.Fatalf("unsigned chain: %v", receipttest.Messages(res))
	}
	// A clock that goes backwards never makes the chain's time regress.
	back, err := readmodel.NewReceipt(chain[2], readmodel.KindOutcome, receipttest.Outcome("infra", "vpc", lavav1.Phase_PHASE_APPLIED, 9), receipttest.T0.Add(-time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !back.GetTimestamp().AsTime().Equal(chain[2].GetTimestamp().AsTime()) {
		t.Fatalf("timestamp %v, want the head's %v", back.GetTimestamp().AsTime(), chain[2].GetTimestamp().AsTime())
	}
}

// TestSigner: Ed25519 sign/verify round trip over the raw digest, "ed25519" tag, key id, and
// the secret never shows in %v/%+v/%#v/%s (upstream: signer debug hides secret).
func TestSigner(t *testing.T) {
	t.Parallel()
	s := receipttest.Signer(t)
	h := buildChain(t, 1, nil)[0].GetContentHash()
	sig := s.Sign(h)
	if sig.GetAlgo() != "ed25519" || len(sig.GetSig()) != 64 || !bytes.Equal(sig.GetPublicKey(), s.PublicKey()) {
		t.Fatalf("signature %v", sig)
	}
	if !ed25519.Verify(s.PublicKey(), h, sig.GetSig()) {
		t.Fatal("signature does not verify over the raw digest bytes")
	}
	sum := blake3.Sum256(s.PublicKey())
	if want := hex.EncodeToString(sum[:])[:16]; sig.GetKeyId() != want || s.KeyID() != want {
		t.Fatalf("key id %q / %q, want %q", sig.GetKeyId(), s.KeyID(), want)
	}
	seedHex := hex.EncodeToString([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32})
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(format, s)
		if strings.Contains(out, seedHex) || strings.Contains(out, seedHex[:16]) || !strings.Contains(out, s.KeyID()) {
			t.Errorf("%s of the signer = %q: must show the key id and never the seed", format, out)
		}
	}
	if _, err := readmodel.NewSigner(make([]byte, 31)); err == nil {
		t.Fatal("31-byte seed accepted")
	}
	var none *readmodel.Signer
	if got := none.Sign(h).GetAlgo(); got != readmodel.AlgoNone {
		t.Fatalf("nil signer algo %q", got)
	}
}

// TestVerify_signedChain: a signed chain of five ticks verifies with the embedded key, with the
// signer's key given, and with signatures required (upstream: Ed25519 chain verifies, 5-tick
// chain).
func TestVerify_signedChain(t *testing.T) {
	t.Parallel()
	s := receipttest.Signer(t)
	chain := buildChain(t, 5, s)
	for _, opts := range []readmodel.VerifyOptions{{}, {PublicKey: s.PublicKey()}, {RequireSignatures: true, PublicKey: s.PublicKey()}} {
		res := readmodel.Verify(chain, opts)
		if !res.OK() || res.Length != 5 || !bytes.Equal(res.HeadHash, chain[4].GetContentHash()) {
			t.Fatalf("Verify(%+v) = %v length %d head %x", opts, receipttest.Messages(res), res.Length, res.HeadHash)
		}
	}
	if res := readmodel.Verify(nil, readmodel.VerifyOptions{RequireSignatures: true}); !res.OK() || res.Length != 0 || res.HeadHash != nil {
		t.Fatalf("empty chain: %+v", res)
	}
}

// TestVerify_tampering: each kind of tampering is reported with upstream's message (docs/dialect.md
// section 8.4), and only the tampered receipt fails.
func TestVerify_tampering(t *testing.T) {
	t.Parallel()
	s := receipttest.Signer(t)
	good := buildChain(t, 5, s)
	hx := func(b []byte) string { return readmodel.Hex(b) }
	tests := []struct {
		name   string
		tamper func(c []*lavav1.Receipt) []*lavav1.Receipt
		opts   readmodel.VerifyOptions
		want   func(c []*lavav1.Receipt) []string
	}{
		{
			name: "payload",
			tamper: func(c []*lavav1.Receipt) []*lavav1.Receipt {
				c[2].GetPayload().GetOutcome().Phase = lavav1.Phase_PHASE_FAILED
				return c
			},
			want: func(c []*lavav1.Receipt) []string {
				h, _ := readmodel.ContentHash(c[2])
				return []string{fmt.Sprintf("receipt 2: content_hash expected %s, got %s", hx(h), hx(c[2].GetContentHash()))}
			},
		},
		{
			name: "forged prev link",
			tamper: func(c []*lavav1.Receipt) []*lavav1.Receipt {
				c[3].PrevHash = bytes.Repeat([]byte{7}, 32)
				return c
			},
			want: func(c []*lavav1.Receipt) []string {
				h, _ := readmodel.ContentHash(c[3])
				return []string{
					fmt.Sprintf("receipt 3: prev_hash expected %s, got %s", hx(c[2].GetContentHash()), strings.Repeat("07", 32)),
					fmt.Sprintf("receipt 3: content_hash expected %s, got %s", hx(h), hx(c[3].GetContentHash())),
				}
			},
		},
		{
			name: "sequence skip (receipt removed)",
			tamper: func(c []*lavav1.Receipt) []*lavav1.Receipt {
				return append(c[:2], c[3:]...)
			},
			want: func(c []*lavav1.Receipt) []string {
				return []string{
					"receipt 2: sequence expected 2, got 3",
					fmt.Sprintf("receipt 2: prev_hash expected %s, got %s", hx(c[1].GetContentHash()), hx(c[2].GetPrevHash())),
					"receipt 3: sequence expected 3, got 4",
				}
			},
		},
		{
			name: "sequence rewritten",
			tamper: func(c []*lavav1.Receipt) []*lavav1.Receipt {
				c[1].Sequence = 7
				return c
			},
			want: func(c []*lavav1.Receipt) []string {
				h, _ := readmodel.ContentHash(c[1])
				return []string{
					"receipt 1: sequence expected 1, got 7",
					fmt.Sprintf("receipt 1: content_hash expected %s, got %s", hx(h), hx(c[1].GetContentHash())),
				}
			},
		},
		{
			name:   "wrong key",
			tamper: func(c []*lavav1.Receipt) []*lavav1.Receipt { return c },
			opts:   readmodel.VerifyOptions{PublicKey: receipttest.OtherSigner(t).PublicKey()},
			want: func(c []*lavav1.Receipt) []string {
				var out []string
				for i := range c {
					out = append(out, fmt.Sprintf("receipt %d: signature: signature scheme mismatch: signed with key %s, verifier's key is %s",
						i, receipttest.Signer(t).KeyID(), receipttest.OtherSigner(t).KeyID()))
				}
				return out
			},
		},
		{
			name: "re-signed with another key",
			tamper: func(c []*lavav1.Receipt) []*lavav1.Receipt {
				c[4].Signature = receipttest.OtherSigner(t).Sign(c[4].GetContentHash())
				return c
			},
			opts: readmodel.VerifyOptions{PublicKey: receipttest.Signer(t).PublicKey()},
			want: func(c []*lavav1.Receipt) []string {
				return []string{fmt.Sprintf("receipt 4: signature: signature scheme mismatch: signed with key %s, verifier's key is %s",
					receipttest.OtherSigner(t).KeyID(), receipttest.Signer(t).KeyID())}
			},
		},
		{
			name: "tampered signature bytes",
			tamper: func(c []*lavav1.Receipt) []*lavav1.Receipt {
				c[0].Signature.Sig[5] ^= 1
				return c
			},
			want: func([]*lavav1.Receipt) []string {
				return []string{"receipt 0: signature: invalid signature: verification failed"}
			},
		},
		{
			name: "key id does not match",
			tamper: func(c []*lavav1.Receipt) []*lavav1.Receipt {
				c[0].Signature.KeyId = "0000000000000000"
				return c
			},
			want: func([]*lavav1.Receipt) []string {
				return []string{fmt.Sprintf(`receipt 0: signature: invalid signature: key_id "0000000000000000" does not match the public key (%s)`, receipttest.Signer(t).KeyID())}
			},
		},
		{
			name: "stripped signature passes without require-signatures",
			tamper: func(c []*lavav1.Receipt) []*lavav1.Receipt {
				c[1].Signature = &lavav1.Signature{Algo: readmodel.AlgoNone}
				return c
			},
			opts: readmodel.VerifyOptions{PublicKey: receipttest.Signer(t).PublicKey()},
			want: func([]*lavav1.Receipt) []string { return nil },
		},
		{
			name: "stripped signature under require-signatures",
			tamper: func(c []*lavav1.Receipt) []*lavav1.Receipt {
				c[1].Signature = &lavav1.Signature{Algo: readmodel.AlgoNone}
				c[2].Signature = nil
				return c
			},
			opts: readmodel.VerifyOptions{RequireSignatures: true},
			want: func([]*lavav1.Receipt) []string {
				return []string{
					"receipt 1: signature: unsigned (algo none) but signatures are required",
					"receipt 2: signature: unsigned (algo none) but signatures are required",
				}
			},
		},
		{
			name: "unknown algorithm",
			tamper: func(c []*lavav1.Receipt) []*lavav1.Receipt {
				c[0].Signature.Algo = "rsa"
				return c
			},
			want: func([]*lavav1.Receipt) []string {
				return []string{`receipt 0: signature: signature scheme mismatch: algo "rsa", verifier expects "ed25519"`}
			},
		},
		{
			name: "time regression",
			tamper: func(c []*lavav1.Receipt) []*lavav1.Receipt {
				// Re-sealed so that only the time order is wrong.
				c[3].Timestamp = timestamppb.New(receipttest.T0.Add(-time.Second))
				h, _ := readmodel.ContentHash(c[3])
				c[3].ContentHash = h
				c[3].Signature = receipttest.Signer(t).Sign(h)
				c[4].PrevHash = h
				h4, _ := readmodel.ContentHash(c[4])
				c[4].ContentHash = h4
				c[4].Signature = receipttest.Signer(t).Sign(h4)
				return c
			},
			want: func([]*lavav1.Receipt) []string {
				return []string{"receipt 3: timestamp 2026-11-30T01:02:02.4Z regressed below previous 2026-11-30T01:02:03.402Z"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := tt.tamper(clone(good))
			res := readmodel.Verify(c, tt.opts)
			if diff := cmp.Diff(tt.want(c), receipttest.Messages(res)); diff != "" {
				t.Fatalf("failures (-want +got):\n%s", diff)
			}
			if res.OK() != (len(tt.want(c)) == 0) {
				t.Fatalf("OK() = %v", res.OK())
			}
		})
	}
}

// TestNewReceipt_anomalyPayloadsChain: anomaly receipts chain with outcome receipts and verify
// (upstream lava-anomaly: anomaly payloads chain and verify).
func TestNewReceipt_anomalyPayloadsChain(t *testing.T) {
	t.Parallel()
	s := receipttest.Signer(t)
	var chain []*lavav1.Receipt
	var head *lavav1.Receipt
	for i := range 4 {
		kind, p := readmodel.KindOutcome, receipttest.Outcome("infra", "vpc", lavav1.Phase_PHASE_APPLIED, i)
		if i%2 == 1 {
			var err error
			kind = readmodel.KindAnomaly
			if p, err = readmodel.AnomalyFromDetected(receipttest.Anomaly("infra", "vpc", i)); err != nil {
				t.Fatal(err)
			}
		}
		r, err := readmodel.NewReceipt(head, kind, p, receipttest.T0.Add(time.Duration(i)*time.Second), s)
		if err != nil {
			t.Fatal(err)
		}
		chain, head = append(chain, r), r
	}
	if res := readmodel.Verify(chain, readmodel.VerifyOptions{RequireSignatures: true, PublicKey: s.PublicKey()}); !res.OK() {
		t.Fatalf("mixed chain: %v", receipttest.Messages(res))
	}
	if chain[1].GetKind() != readmodel.KindAnomaly || receipttest.PayloadEventID(chain[1].GetPayload()) != fmt.Sprintf("%064x", 5001) {
		t.Fatalf("anomaly receipt: kind %q event %q", chain[1].GetKind(), receipttest.PayloadEventID(chain[1].GetPayload()))
	}
}

// TestOutcomeFromPhaseChanged: the payload carries the outcome fields and nothing secret.
func TestOutcomeFromPhaseChanged(t *testing.T) {
	t.Parallel()
	pc := receipttest.PhaseChanged("infra", "vpc", lavav1.Phase_PHASE_PLANNED, lavav1.Phase_PHASE_FAILED, 4)
	pc.BindingsDigest = strings.Repeat("9", 64)
	got := readmodel.OutcomeFromPhaseChanged(pc).GetOutcome()
	want := &lavav1.OutcomePayload{
		Resource: &lavav1.ResourceRef{Namespace: "infra", Name: "vpc", Uid: "uid-vpc"}, Generation: 1,
		SourceDigest: strings.Repeat("a", 64), TerraformJsonDigest: strings.Repeat("b", 64), PlanId: strings.Repeat("c", 64),
		Phase: lavav1.Phase_PHASE_FAILED, Reason: "FAILED", ChangeSummary: &lavav1.ChangeSummary{Add: 2, Change: 1},
		Diagnostics: []string{"plan: provider unavailable", "Observe=Ok", "Act=Failed"}, EventId: fmt.Sprintf("%064x", 5),
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Fatalf("payload (-want +got):\n%s", diff)
	}
	r, _ := readmodel.NewReceipt(nil, readmodel.KindOutcome, readmodel.OutcomeFromPhaseChanged(pc), receipttest.T0, nil)
	b, _ := proto.Marshal(r)
	if bytes.Contains(b, []byte(pc.BindingsDigest)) {
		t.Fatal("the keyed bindings digest reached the receipt")
	}
}

// TestOutcomeFromTick: upstream's viggy loop receipts: a clean tick is recorded with phase
// Applied, a functional drift under AutoCorrect with phase Reconverging, a critical drift held
// for approval with phase Drifted, the decided action and the plan id; diagnostics name every
// beat ("Decide=Ok (AUTO_CORRECT)"); three ticks form a verifying, linked chain.
func TestOutcomeFromTick(t *testing.T) {
	t.Parallel()
	ticks := []*lavav1.TickReported{
		receipttest.Tick("infra", "vpc", 0, lavav1.Phase_PHASE_APPLIED, 0, ""),
		receipttest.Tick("infra", "vpc", 1, lavav1.Phase_PHASE_RECONVERGING, lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT, "1 drifted field(s)"),
		receipttest.Tick("infra", "vpc", 2, lavav1.Phase_PHASE_DRIFTED, lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL, "1 drifted field(s)"),
	}
	want := []struct {
		phase  lavav1.Phase
		reason string
		plan   string
		diag   string
	}{
		{lavav1.Phase_PHASE_APPLIED, "Tick", "", "Observe=Ok"},
		{lavav1.Phase_PHASE_RECONVERGING, "AutoCorrect", "", "Decide=Ok (AUTO_CORRECT)"},
		{lavav1.Phase_PHASE_DRIFTED, "RequireApproval", strings.Repeat("d", 64), "Diff=Ok (1 drifted field(s))"},
	}
	var chain []*lavav1.Receipt
	var head *lavav1.Receipt
	for i, tr := range ticks {
		p := readmodel.OutcomeFromTick(tr)
		o := p.GetOutcome()
		if o.GetPhase() != want[i].phase || o.GetReason() != want[i].reason || o.GetPlanId() != want[i].plan ||
			len(o.GetDiagnostics()) != 7 || !slices.Contains(o.GetDiagnostics(), want[i].diag) || o.GetEventId() != tr.GetEnvelope().GetEventId() {
			t.Fatalf("tick %d: %v", i, o)
		}
		r, err := readmodel.NewReceipt(head, readmodel.KindOutcome, p, receipttest.T0.Add(time.Duration(i)*time.Minute), receipttest.Signer(t))
		if err != nil {
			t.Fatal(err)
		}
		chain, head = append(chain, r), r
	}
	if got := chain[0].GetPayload().GetOutcome().GetDiagnostics()[6]; got != "Tick=Ok" {
		t.Fatalf("last diagnostic %q", got)
	}
	for i := 1; i < len(chain); i++ {
		if !bytes.Equal(chain[i].GetPrevHash(), chain[i-1].GetContentHash()) {
			t.Fatalf("tick %d does not link to tick %d", i, i-1)
		}
	}
	if res := readmodel.Verify(chain, readmodel.VerifyOptions{RequireSignatures: true}); !res.OK() {
		t.Fatal(receipttest.Messages(res))
	}
}
