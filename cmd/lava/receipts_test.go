package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/readmodel"
)

// receiptsFixture is a JetStream server holding a signed lifecycle chain for infra/vpc.
type receiptsFixture struct {
	srv     *natstest.Server
	chain   []*lavav1.Receipt
	pubFile string
	signer  *readmodel.Signer
}

func newReceiptsFixture(t *testing.T) receiptsFixture {
	t.Helper()
	srv := natstest.RunJetStream(t)
	js := srv.JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	signer, err := readmodel.ParseSigner(strings.Repeat("5a", 32))
	if err != nil {
		t.Fatal(err)
	}
	phases := []lavav1.Phase{lavav1.Phase_PHASE_PENDING, lavav1.Phase_PHASE_SYNTHESIZED, lavav1.Phase_PHASE_PLANNED,
		lavav1.Phase_PHASE_APPLIED, lavav1.Phase_PHASE_FINALIZING}
	ref := &lavav1.ResourceRef{Namespace: "infra", Name: "vpc", Uid: "u-1"}
	var chain []*lavav1.Receipt
	var head *lavav1.Receipt
	var prevSeq uint64
	for i, p := range phases {
		pc := &lavav1.PhaseChanged{
			Envelope: &lavav1.Envelope{EventId: fmt.Sprintf("%064x", i+1), Resource: ref, Generation: 1},
			To:       p, Reason: "Test", PlanId: strings.Repeat("c", 64),
		}
		r, err := readmodel.NewReceipt(head, readmodel.KindOutcome, readmodel.OutcomeFromPhaseChanged(pc), time.Now(), signer)
		if err != nil {
			t.Fatal(err)
		}
		// Stored as attest stores a receipt (the CLI's tests do not run the attest service).
		id := pc.GetEnvelope().GetEventId()
		m, err := readmodel.EncodeReceipt(bus.ReceiptSubject(ref.GetNamespace(), ref.GetName()), r, id, id, prevSeq, readmodel.PhasesSeq{})
		if err != nil {
			t.Fatal(err)
		}
		ack, err := js.PublishMsg(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		chain, head, prevSeq = append(chain, r), r, ack.Sequence
	}
	pubFile := filepath.Join(t.TempDir(), "lava.pub")
	if err := os.WriteFile(pubFile, []byte(readmodel.Hex(signer.PublicKey())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return receiptsFixture{srv: srv, chain: chain, pubFile: pubFile, signer: signer}
}

// publishCopy writes chain as resource ns/name's chain, receipt by receipt, as a tamperer with
// write access to the stream could.
func publishCopy(t *testing.T, js jetstream.JetStream, ns, name string, chain []*lavav1.Receipt) {
	t.Helper()
	for _, r := range chain {
		data, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(bus.ReceiptSubject(ns, name))
		m.Data = data
		m.Header.Set(bus.HeaderSchema, "lava.v1.Receipt")
		if _, err := js.PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
}

// publishRaw publishes data on subject with the receipt schema header.
func publishRaw(t *testing.T, js jetstream.JetStream, subject string, data []byte) {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(bus.HeaderSchema, "lava.v1.Receipt")
	if _, err := js.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

func cloneChain(chain []*lavav1.Receipt) []*lavav1.Receipt {
	out := make([]*lavav1.Receipt, len(chain))
	for i, r := range chain {
		out[i] = proto.Clone(r).(*lavav1.Receipt)
	}
	return out
}

// TestReceiptsVerify: `lava receipts verify` exits 0 on the real chain and 1, printing each
// failure in upstream's format, on a tampered payload, a forged link, a removed receipt, a
// wrong key and a stripped signature under --require-signatures; 2 on usage errors.
func TestReceiptsVerify(t *testing.T) {
	t.Parallel()
	fx := newReceiptsFixture(t)
	js := fx.srv.JetStream()
	url := fx.srv.URL()
	other, err := readmodel.ParseSigner(strings.Repeat("77", 32))
	if err != nil {
		t.Fatal(err)
	}
	otherPub := filepath.Join(t.TempDir(), "other.pub")
	if err := os.WriteFile(otherPub, []byte(readmodel.Hex(other.PublicKey())), 0o600); err != nil {
		t.Fatal(err)
	}
	badKey := filepath.Join(t.TempDir(), "bad.pub")
	if err := os.WriteFile(badKey, []byte("not hex"), 0o600); err != nil {
		t.Fatal(err)
	}

	payload := cloneChain(fx.chain)
	payload[2].GetPayload().GetOutcome().Phase = lavav1.Phase_PHASE_FAILED
	publishCopy(t, js, "tamper", "payload", payload)
	link := cloneChain(fx.chain)
	link[3].PrevHash = make([]byte, 32)
	publishCopy(t, js, "tamper", "link", link)
	publishCopy(t, js, "tamper", "sequence", append(cloneChain(fx.chain[:1]), cloneChain(fx.chain[2:])...))
	stripped := cloneChain(fx.chain)
	stripped[4].Signature = &lavav1.Signature{Algo: readmodel.AlgoNone}
	publishCopy(t, js, "tamper", "stripped", stripped)
	// Foreign messages between real receipts (docs/security.md, "Receipts"): garbage, a receipt
	// with a broken signature and a replayed copy of receipt 1 are skipped and named.
	broken := proto.Clone(fx.chain[3]).(*lavav1.Receipt)
	broken.Signature.Sig[0] ^= 0xff
	foreign := []*lavav1.Receipt{fx.chain[0], fx.chain[1], fx.chain[1], fx.chain[2], broken, fx.chain[3], fx.chain[4]}
	publishCopy(t, js, "tamper", "foreign", foreign[:2])
	publishRaw(t, js, bus.ReceiptSubject("tamper", "foreign"), []byte("garbage \xff"))
	publishCopy(t, js, "tamper", "foreign", foreign[2:])

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr []string
	}{
		{
			name:   "valid, required signatures, signer's key",
			args:   []string{"infra/vpc", "--public-key", fx.pubFile},
			code:   exitOK,
			stdout: fmt.Sprintf("infra/vpc: ok (5 receipts, head %s, keys %s)\n", readmodel.Hex(fx.chain[4].GetContentHash()), fx.signer.KeyID()),
		},
		{name: "no pinned key", args: []string{"infra/vpc"}, code: exitUsage, stderr: []string{"a pinned public key is required"}},
		{name: "embedded keys under --allow-unsigned", args: []string{"infra/vpc", "--allow-unsigned"}, code: exitOK, stdout: "infra/vpc: ok (5 receipts",
			stderr: []string{"WARNING: --allow-unsigned", "proves nothing"}},
		{name: "empty chain", args: []string{"infra/none", "--public-key", fx.pubFile}, code: exitInvalid, stderr: []string{"lava: infra/none: no receipts (is the name right?"}},
		{name: "empty chain allowed", args: []string{"infra/none", "--allow-empty", "--public-key", fx.pubFile}, code: exitOK, stdout: "infra/none: ok (0 receipts)\n"},
		{
			// The tampered copy is no receipt attest wrote (its content_hash does not recompute): it
			// is skipped, and the next real receipt shows the gap.
			name: "tampered payload",
			args: []string{"tamper/payload", "--public-key", fx.pubFile},
			code: exitInvalid,
			stderr: []string{
				fmt.Sprintf(": bad_content_hash: content_hash %s does not match the receipt", readmodel.Hex(fx.chain[2].GetContentHash())),
				"receipt 2: sequence expected 2, got 3\n",
				fmt.Sprintf("receipt 2: prev_hash expected %s, got %s\n", readmodel.Hex(fx.chain[1].GetContentHash()), readmodel.Hex(fx.chain[2].GetContentHash())),
			},
		},
		{
			name: "forged link",
			args: []string{"tamper/link", "--public-key", fx.pubFile},
			code: exitInvalid,
			stderr: []string{
				"bad_content_hash",
				"receipt 3: sequence expected 3, got 4\n",
				fmt.Sprintf("receipt 3: prev_hash expected %s, got %s\n", readmodel.Hex(fx.chain[2].GetContentHash()), readmodel.Hex(fx.chain[3].GetContentHash())),
			},
		},
		{
			name:   "foreign messages are skipped and named",
			args:   []string{"tamper/foreign", "--public-key", fx.pubFile},
			code:   exitOK,
			stdout: fmt.Sprintf("tamper/foreign: ok (5 receipts, head %s, keys %s, 3 foreign messages skipped)\n", readmodel.Hex(fx.chain[4].GetContentHash()), fx.signer.KeyID()),
			stderr: []string{
				"skipped a foreign message on tamper/foreign's receipt subject: stream sequence ",
				": does_not_follow: sequence 1 ", ": not_a_receipt: ", ": bad_signature: invalid signature: verification failed",
			},
		},
		{
			name:   "removed receipt",
			args:   []string{"tamper/sequence", "--public-key", fx.pubFile},
			code:   exitInvalid,
			stderr: []string{"receipt 1: sequence expected 1, got 2\n", "receipt 1: prev_hash expected ", "receipt 3: sequence expected 3, got 4\n"},
		},
		{
			name:   "wrong key",
			args:   []string{"infra/vpc", "--public-key", otherPub},
			code:   exitInvalid,
			stderr: []string{fmt.Sprintf("receipt 0: signature: signature scheme mismatch: signed with key %s, verifier's key is %s\n", fx.signer.KeyID(), other.KeyID())},
		},
		{name: "stripped signature passes only under --allow-unsigned", args: []string{"tamper/stripped", "--public-key", fx.pubFile, "--allow-unsigned"},
			code: exitOK, stdout: "tamper/stripped: ok (5 receipts", stderr: []string{"WARNING: --allow-unsigned"}},
		{
			name:   "stripped signature by default",
			args:   []string{"tamper/stripped", "--public-key", fx.pubFile},
			code:   exitInvalid,
			stderr: []string{"receipt 4: signature: unsigned (algo none) but signatures are required\n"},
		},
		{name: "no slash", args: []string{"vpc"}, code: exitUsage, stderr: []string{`resource "vpc": want NAMESPACE/NAME`}},
		{name: "no resource", args: nil, code: exitUsage},
		{name: "bad key file", args: []string{"infra/vpc", "--public-key", badKey}, code: exitUsage, stderr: []string{"invalid key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"receipts", "verify", "--nats-url", url}, tt.args...)
			code, stdout, stderr := runLava(t, "", args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			if !strings.HasPrefix(stdout, tt.stdout) {
				t.Errorf("stdout %q, want prefix %q", stdout, tt.stdout)
			}
			for _, want := range tt.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
}

// TestReceiptsVerify_unreachable: a NATS server that cannot be reached is exit 3 (neither a
// verification result nor a usage error), with a message saying lava up must be running.
func TestReceiptsVerify_unreachable(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	url := srv.URL()
	srv.Shutdown()
	for _, args := range [][]string{{"receipts", "verify", "a/b", "--allow-unsigned"}, {"receipts", "show", "a/b"}, {"state", "show", "a/b"}, {"state", "unlock", "a/b"}} {
		code, _, stderr := runLava(t, "", append(args, "--nats-url", url)...)
		if i := strings.Index(stderr, "lava: no NATS"); i > 0 {
			stderr = stderr[i:] // after --allow-unsigned's warning
		}
		want := "lava: no NATS server at " + url + " (URL from --nats-url)"
		if code != exitUnavail || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "is `lava up` running?") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d, stderr starting %q", args, code, stderr, exitUnavail, want)
		}
	}
}

// TestNATSURL_lookup: without --nats-url, every NATS command takes $LAVA_NATS_URL, else the URL
// lava up wrote to <state-dir>/nats.url. Not parallel: it sets the environment.
func TestNATSURL_lookup(t *testing.T) {
	fx := newReceiptsFixture(t)
	stateDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(stateDir, "nats.url"), []byte(fx.srv.URL()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// lava up's public key in the state directory is the pinned key of receipts verify.
	pub, err := os.ReadFile(fx.pubFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stateDir, "signing.pub"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LAVA_NATS_URL", "")
	for _, args := range [][]string{{"receipts", "show", "infra/vpc"}, {"receipts", "verify", "infra/vpc"}, {"state", "unlock", "infra/vpc"}} {
		if code, _, stderr := runLava(t, "", append(args, "--state-dir", stateDir)...); code != exitOK {
			t.Errorf("%v --state-dir: exit %d, stderr %q", args, code, stderr)
		}
	}
	// $LAVA_NATS_URL wins over the state dir's file, for state as for receipts.
	t.Setenv("LAVA_NATS_URL", fx.srv.URL())
	empty := t.TempDir()
	for _, args := range [][]string{{"receipts", "show", "infra/vpc"}, {"state", "unlock", "infra/vpc"}} {
		if code, _, stderr := runLava(t, "", append(args, "--state-dir", empty)...); code != exitOK {
			t.Errorf("%v with $LAVA_NATS_URL: exit %d, stderr %q", args, code, stderr)
		}
	}
	t.Setenv("LAVA_NATS_URL", "nats://127.0.0.1:1")
	if code, _, stderr := runLava(t, "", "state", "show", "infra/vpc", "--state-dir", stateDir); code != exitUnavail ||
		!strings.Contains(stderr, "(URL from $LAVA_NATS_URL)") {
		t.Errorf("state show with a dead $LAVA_NATS_URL: exit %d, stderr %q", code, stderr)
	}
}

// TestReceiptsShow prints one line per receipt in text, and the chain as protojson.
func TestReceiptsShow(t *testing.T) {
	t.Parallel()
	fx := newReceiptsFixture(t)
	code, stdout, stderr := runLava(t, "", "receipts", "show", "infra/vpc", "--nats-url", fx.srv.URL())
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines:\n%s", len(lines), stdout)
	}
	want := fmt.Sprintf("3\t%s\tlava.outcome\tAPPLIED/Test\t%s\t%s", readmodel.FormatTimestamp(fx.chain[3].GetTimestamp().AsTime()),
		readmodel.Hex(fx.chain[3].GetContentHash()), fx.signer.KeyID())
	if lines[3] != want {
		t.Fatalf("line 3 %q, want %q", lines[3], want)
	}
	code, stdout, stderr = runLava(t, "", "receipts", "show", "-o", "json", "infra/vpc", "--nats-url", fx.srv.URL())
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{`"receipts"`, `"kind": "lava.outcome"`, `"phase": "PHASE_FINALIZING"`, `"algo": "ed25519"`} {
		if !strings.Contains(stdout, w) {
			t.Errorf("json lacks %s", w)
		}
	}
}

// TestReceiptsKeygen: keygen prints SECRET and PUBLIC lines that belong together (a signer from
// the secret has that public key) and --secret-file keeps the seed off stdout.
func TestReceiptsKeygen(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runLava(t, "", "receipts", "keygen")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var secret, public string
	if _, err := fmt.Sscanf(stdout, "SECRET %s\nPUBLIC %s\n", &secret, &public); err != nil {
		t.Fatalf("output %q: %v", stdout, err)
	}
	s, err := readmodel.ParseSigner(secret)
	if err != nil || readmodel.Hex(s.PublicKey()) != public {
		t.Fatalf("SECRET does not yield PUBLIC: %v", err)
	}
	file := filepath.Join(t.TempDir(), "seed")
	code, stdout, stderr = runLava(t, "", "receipts", "keygen", "--secret-file", file)
	if code != exitOK || strings.Contains(stdout, "SECRET") || !strings.HasPrefix(stdout, "PUBLIC ") {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	s2, err := readmodel.LoadSigner(file)
	if err != nil || "PUBLIC "+readmodel.Hex(s2.PublicKey())+"\n" != stdout {
		t.Fatalf("secret file: %v", err)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secret file mode: %v %v", st, err)
	}
	// README's install step: "lava receipts keygen --secret-file attest.key > attest.pub"; the
	// file as written is what "lava receipts verify --public-key" reads.
	pubFile := filepath.Join(t.TempDir(), "attest.pub")
	if err := os.WriteFile(pubFile, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if pub, err := readmodel.LoadPublicKey(pubFile); err != nil || !pub.Equal(s2.PublicKey()) {
		t.Fatalf("keygen's stdout as a public-key file: %v", err)
	}
	if _, err := readmodel.ParsePublicKey("SECRET " + readmodel.Hex(s2.PublicKey())); err == nil {
		t.Fatal("a SECRET line was taken for a public key")
	}
	if code, _, _ := runLava(t, "", "receipts", "keygen", "--secret-file", file); code != exitUsage {
		t.Fatalf("overwriting an existing secret file: exit %d", code)
	}
}
