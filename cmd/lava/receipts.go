package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/readmodel"
	"github.com/lava-operator/lava/internal/up"
)

// isFile reports whether p is an existing regular file.
func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

const receiptsVerifyLong = `Verify reads the receipt chain of the LavaArchitecture NS/NAME from the JetStream stream
LAVA_RECEIPTS and checks, for every receipt in order: its sequence, its link to the previous
receipt (prev_hash), its content hash (recomputed from the canonical encoding), its signature
and the time order. Each violation is printed on stderr in upstream's format, e.g.

  receipt 2: content_hash expected <hex>, got <hex>

Every receipt must be signed, with the pinned key: --public-key FILE (64 hex digits, the
PUBLIC line of "lava receipts keygen"), else lava up's <state-dir>/signing.pub when it
exists; without either the command refuses to run. --allow-unsigned relaxes both (unsigned
receipts pass, and without a pinned key each receipt's embedded key is used) and says so on
stderr: a chain verified that way proves nothing about who wrote it. A resource without receipts (a mistyped name, say) fails verification
unless --allow-empty is given. Exit code 0 when the chain verifies, 1 when it does not,
2 for a usage error, 3 when NATS cannot be reached.

The NATS server is ` + natsURLHelp + `.
lava up serves receipts only while it runs: run these commands from another terminal while
it does.`

func newReceiptsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "receipts",
		Short: "Read, verify and sign the per-resource receipt chains",
	}
	cmd.AddCommand(newReceiptsVerifyCmd(), newReceiptsShowCmd(), newReceiptsKeygenCmd())
	return cmd
}

// parseResource splits "NS/NAME".
func parseResource(arg string) (string, string, error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("resource %q: want NAMESPACE/NAME", arg)
	}
	return ns, name, nil
}

func newReceiptsVerifyCmd() *cobra.Command {
	var (
		nf         natsFlags
		publicKey  string
		requireSig bool
		allowUnsig bool
		allowEmpty bool
	)
	cmd := &cobra.Command{
		Use:     "verify NS/NAME",
		Short:   "Verify a resource's receipt chain (sequence, links, hashes, signatures, time order)",
		Long:    receiptsVerifyLong,
		Example: "  lava receipts verify infra/prod-vpc --nats-url nats://nats:4222 --public-key lava.pub",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, err := parseResource(args[0])
			if err != nil {
				return err
			}
			opts := readmodel.VerifyOptions{RequireSignatures: !allowUnsig || requireSig}
			if publicKey == "" {
				if p := filepath.Join(nf.stateDir, up.FilePublicKey); isFile(p) {
					publicKey = p
				}
			}
			switch {
			case publicKey != "":
				if opts.PublicKey, err = readmodel.LoadPublicKey(publicKey); err != nil {
					return err
				}
			case !allowUnsig:
				return errors.New("a pinned public key is required: --public-key FILE (or lava up's <state-dir>/" + up.FilePublicKey +
					"); --allow-unsigned verifies without one")
			}
			if allowUnsig {
				fmt.Fprintln(cmd.ErrOrStderr(), "lava: WARNING: --allow-unsigned: unsigned receipts pass"+
					map[bool]string{true: "", false: " and each receipt's own embedded key is trusted"}[publicKey != ""]+
					"; this chain proves nothing about who wrote it")
			}
			nc, js, err := nf.connect()
			if err != nil {
				return err
			}
			defer nc.Close()
			read, err := readmodel.ReadChain(cmd.Context(), js, ns, name, opts)
			if err != nil {
				return err
			}
			chain := read.Receipts
			// Only attest appends receipts: anything else on the subject is skipped, named here
			// (attest reports it as a foreign_receipt anomaly), and does not fail the chain.
			for _, f := range read.Foreign {
				fmt.Fprintf(cmd.ErrOrStderr(), "lava: skipped a foreign message on %s/%s's receipt subject: %s\n", ns, name, f)
			}
			if len(chain) == 0 && !allowEmpty {
				return invalidInput(fmt.Errorf("%s/%s: no receipts (is the name right? a resource gets its first receipt when it is first seen; --allow-empty accepts an empty chain)", ns, name))
			}
			res := readmodel.Verify(chain, opts)
			for _, f := range res.Failures {
				fmt.Fprintln(cmd.ErrOrStderr(), f.Message)
			}
			if !res.OK() {
				return invalidInputPrinted(fmt.Errorf("%s/%s: %d failure(s)", ns, name, len(res.Failures)))
			}
			skipped := ""
			if n := len(read.Foreign); n > 0 {
				skipped = ", " + plural(n, "foreign message") + " skipped"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s: ok (%s%s%s)\n", ns, name, plural(int(res.Length), "receipt"), describeHead(chain), skipped)
			return nil
		},
	}
	nf.register(cmd)
	cmd.Flags().StringVar(&publicKey, "public-key", "", "file with the Ed25519 public key (64 hex digits) every signature must verify with")
	cmd.Flags().BoolVar(&requireSig, "require-signatures", false, "fail on unsigned receipts (the default; kept for scripts, overrides --allow-unsigned)")
	cmd.Flags().BoolVar(&allowUnsig, "allow-unsigned", false, "accept unsigned receipts and, without a pinned key, each receipt's embedded key (warns)")
	cmd.Flags().BoolVar(&allowEmpty, "allow-empty", false, "accept a resource without receipts (an empty chain) as verified")
	return cmd
}

// describeHead is ", head <hash>, keys <ids>" for a non-empty chain.
func describeHead(chain []*lavav1.Receipt) string {
	if len(chain) == 0 {
		return ""
	}
	var keys []string
	seen := map[string]bool{}
	for _, r := range chain {
		id := r.GetSignature().GetKeyId()
		if id == "" {
			id = readmodel.AlgoNone
		}
		if !seen[id] {
			seen[id] = true
			keys = append(keys, id)
		}
	}
	return fmt.Sprintf(", head %s, keys %s", readmodel.Hex(chain[len(chain)-1].GetContentHash()), strings.Join(keys, ","))
}

func newReceiptsShowCmd() *cobra.Command {
	var (
		nf     natsFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "show NS/NAME",
		Short: "Print a resource's receipt chain",
		Long: `Show prints the receipt chain of NS/NAME from LAVA_RECEIPTS: with -o text (the default) one
line per receipt (sequence, timestamp, kind, what it attests, content hash, signing key id);
with -o json the chain as a lava.v1.GetChainResponse in protojson. It does not verify the
chain; use "lava receipts verify".`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, err := parseResource(args[0])
			if err != nil {
				return err
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: want text or json", output)
			}
			nc, js, err := nf.connect()
			if err != nil {
				return err
			}
			defer nc.Close()
			read, err := readmodel.ReadChain(cmd.Context(), js, ns, name, readmodel.VerifyOptions{})
			if err != nil {
				return err
			}
			chain := read.Receipts
			for _, f := range read.Foreign {
				fmt.Fprintf(cmd.ErrOrStderr(), "lava: skipped a foreign message on %s/%s's receipt subject: %s\n", ns, name, f)
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				b, err := protojson.Marshal(&lavav1.GetChainResponse{Receipts: chain})
				if err != nil {
					return fmt.Errorf("encode: %w", err)
				}
				// protojson's spacing is deliberately unstable; indent it ourselves.
				var buf bytes.Buffer
				if err := json.Indent(&buf, b, "", "  "); err != nil {
					return fmt.Errorf("encode: %w", err)
				}
				buf.WriteByte('\n')
				_, err = out.Write(buf.Bytes())
				return err
			}
			writeChain(out, chain)
			return nil
		},
	}
	nf.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// writeChain prints one line per receipt.
func writeChain(w io.Writer, chain []*lavav1.Receipt) {
	for _, r := range chain {
		what := ""
		if o := r.GetPayload().GetOutcome(); o != nil {
			what = strings.TrimPrefix(o.GetPhase().String(), "PHASE_")
			if o.GetReason() != "" {
				what += "/" + o.GetReason()
			}
		} else if a := r.GetPayload().GetAnomaly().GetAnomaly(); a != nil {
			what = strings.TrimPrefix(a.GetKind().String(), "ANOMALY_KIND_") + "/" + strings.TrimPrefix(a.GetSeverity().String(), "SEVERITY_")
		}
		key := r.GetSignature().GetKeyId()
		if key == "" {
			key = readmodel.AlgoNone
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", r.GetSequence(), readmodel.FormatTimestamp(r.GetTimestamp().AsTime()),
			r.GetKind(), what, readmodel.Hex(r.GetContentHash()), key)
	}
}

func newReceiptsKeygenCmd() *cobra.Command {
	var secretFile string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Generate an Ed25519 receipt signing key",
		Long: `Keygen generates an Ed25519 key for attest and prints, as upstream's keygen does,

  SECRET <64 hex digits: the seed attest signs with>
  PUBLIC <64 hex digits: the key "lava receipts verify --public-key" takes>

With --secret-file FILE the seed is written to FILE (mode 0600, which must not exist) instead
of stdout, ready for "kubectl create secret generic lava-attest-signing-key --from-file=key=FILE".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, seed, err := readmodel.GenerateSigner(nil)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if secretFile != "" {
				f, err := os.OpenFile(secretFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
				if err != nil {
					return fmt.Errorf("secret file: %w", err)
				}
				_, werr := fmt.Fprintln(f, readmodel.Hex(seed))
				if err := errors.Join(werr, f.Close()); err != nil {
					return fmt.Errorf("secret file: %w", err)
				}
			} else {
				fmt.Fprintf(out, "SECRET %s\n", readmodel.Hex(seed))
			}
			fmt.Fprintf(out, "%s %s\n", readmodel.PublicKeyLabel, readmodel.Hex(s.PublicKey()))
			return nil
		},
	}
	cmd.Flags().StringVar(&secretFile, "secret-file", "", "write the seed to this new file instead of stdout")
	return cmd
}
