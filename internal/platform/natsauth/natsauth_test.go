package natsauth_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/natsauth"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// authorized is a real in-process nats-server whose only users are the generated identities,
// with the topology created by the bootstrap identity.
type authorized struct {
	srv   *natstest.Server
	dir   string
	topo  bus.Topology
	admin jetstream.JetStream
}

func startAuthorized(t *testing.T) *authorized {
	t.Helper()
	a := startEmpty(t)
	if err := bus.EnsureTopology(t.Context(), a.admin, bus.TopologyOptions{}); err != nil {
		t.Fatalf("bootstrap identity cannot create the topology: %v", err)
	}
	return a
}

// startEmpty is startAuthorized without the topology.
func startEmpty(t *testing.T) *authorized {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "nats-credentials")
	keys, err := natsauth.GenerateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	topo := bus.Declare(bus.TopologyOptions{})
	users, err := natsauth.Users(topo, keys)
	if err != nil {
		t.Fatal(err)
	}
	adminKey, err := nats.NkeyOptionFromSeed(filepath.Join(dir, natsauth.SeedFileName(bus.IdentityBootstrap)))
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Run(t, natstest.Config{Nkeys: users, Client: []nats.Option{adminKey,
		nats.CustomInboxPrefix(bus.InboxPrefix(bus.IdentityBootstrap))}})
	return &authorized{srv: srv, dir: dir, topo: topo, admin: srv.JetStream()}
}

// connect connects as identity through bus.Connect, the services' one connect path.
func (a *authorized) connect(t *testing.T, identity string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, js, err := bus.Connect(bus.ConnectOptions{URL: a.srv.URL(), Name: "test-" + identity, Identity: identity,
		NKeyFile: filepath.Join(a.dir, natsauth.SeedFileName(identity))})
	if err != nil {
		t.Fatalf("connect as %s: %v", identity, err)
	}
	t.Cleanup(nc.Close)
	return nc, js
}

// refused waits up to 2s for the server's permissions violation naming subject on nc.
func refused(nc *nats.Conn, subject string) bool {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		_ = nc.Flush()
		if err := nc.LastError(); err != nil && errors.Is(err, nats.ErrPermissionViolation) &&
			strings.Contains(err.Error(), `"`+subject+`"`) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// sample is a literal subject matched by filter ("*" -> "ns", ">" -> "x").
func sample(filter string) string {
	toks := strings.Split(filter, ".")
	for i, tok := range toks {
		switch tok {
		case "*":
			toks[i] = "ns"
		case ">":
			toks[i] = "x"
		}
	}
	return strings.Join(toks, ".")
}

// lavaSubjects are samples of every subject any identity writes.
func lavaSubjects(t *testing.T, topo bus.Topology) []string {
	t.Helper()
	var out []string
	for _, a := range topo.Access {
		for _, f := range a.Publish {
			out = append(out, sample(f))
		}
	}
	out = append(out, "lava.v1.phase.ns.x.applied", "lava.v1.resource.ns.x.deletion_requested",
		"lava.v1.receipt.ns.x", "lava.anomaly.critical.apply_failure", "lava.v1.command.destroy.ns.x.retry")
	slices.Sort(out)
	return slices.Compact(out)
}

func allowed(p bus.Permissions, subject string) bool {
	return slices.ContainsFunc(p.Publish, func(f string) bool { return server.SubjectMatchesFilter(subject, f) })
}

// TestPermissions_everyServiceIsRefusedOutsideItsPermissions publishes, as every service, every
// Lava subject it does not write, fetches from every durable consumer not its own, subscribes
// to the whole tree and to another identity's inbox, binds the buckets it does not use and
// creates a stream: the real server must refuse each one (and store nothing). It also does
// what the service is declared to do, which must work.
func TestPermissions_everyServiceIsRefusedOutsideItsPermissions(t *testing.T) {
	t.Parallel()
	a := startAuthorized(t)
	ctx := t.Context()
	subjects := lavaSubjects(t, a.topo)
	for _, svc := range bus.Services() {
		t.Run(svc, func(t *testing.T) {
			t.Parallel()
			perm, err := a.topo.Permissions(svc)
			if err != nil {
				t.Fatal(err)
			}
			nc, js := a.connect(t, svc)
			access, _ := a.topo.AccessOf(svc)

			// Allowed: publish what it writes, acknowledged by the stream.
			for _, f := range access.Publish {
				s := sample(f)
				if _, err := js.Publish(ctx, s, []byte("ok")); err != nil {
					t.Errorf("%s may publish %s but: %v", svc, s, err)
				}
			}
			// Refused: every other subject; the stream must not store it.
			for _, s := range subjects {
				if allowed(perm, s) {
					continue
				}
				body := []byte("forged by " + svc + " " + s)
				if err := nc.Publish(s, body); err != nil {
					t.Fatal(err)
				}
				if !refused(nc, s) {
					t.Errorf("server did not refuse %s publishing %s", svc, s)
				}
				assertNotStored(t, a.admin, s, body)
			}

			// Its own consumers work; every other durable is refused.
			for _, c := range a.topo.Consumers {
				ctx, cancel := context.WithTimeout(ctx, timeoutFor(c.Config.Durable == svc))
				cons, err := js.Consumer(ctx, c.Stream, c.Config.Durable)
				cancel()
				if c.Config.Durable == svc {
					if err != nil {
						t.Errorf("%s cannot bind its consumer on %s: %v", svc, c.Stream, err)
						continue
					}
					if _, err := cons.Fetch(1, jetstream.FetchMaxWait(200*time.Millisecond)); err != nil {
						t.Errorf("%s cannot fetch from its consumer on %s: %v", svc, c.Stream, err)
					}
					continue
				}
				if err == nil {
					t.Errorf("%s bound %s's consumer on %s", svc, c.Config.Durable, c.Stream)
				}
				next := "$JS.API.CONSUMER.MSG.NEXT." + c.Stream + "." + c.Config.Durable
				if err := nc.PublishRequest(next, nc.NewInbox(), []byte(`{"batch":1}`)); err != nil {
					t.Fatal(err)
				}
				if !refused(nc, next) {
					t.Errorf("server did not refuse %s pulling %s's consumer on %s", svc, c.Config.Durable, c.Stream)
				}
			}

			// No core subscription on the tree, no other identity's inbox.
			for _, s := range []string{"lava.>", ">", "_INBOX.>", bus.InboxPrefix(bus.IdentityBootstrap) + ".>", "$KV.>", "$O.>"} {
				if _, err := nc.SubscribeSync(s); err != nil {
					t.Fatal(err)
				}
				if !refused(nc, s) {
					t.Errorf("server did not refuse %s subscribing %s", svc, s)
				}
			}

			// Buckets: what it uses works (writes only where declared); the rest is refused.
			uses := map[string]bool{}
			for _, b := range access.KeyValues {
				uses[b.Bucket] = b.Write
			}
			for _, cfg := range a.topo.KeyValues {
				write, used := uses[cfg.Bucket]
				ctx, cancel := context.WithTimeout(ctx, timeoutFor(used))
				kv, err := js.KeyValue(ctx, cfg.Bucket)
				switch {
				case !used && err == nil:
					t.Errorf("%s bound KV bucket %s it does not use", svc, cfg.Bucket)
				case used && err != nil:
					t.Errorf("%s cannot bind KV bucket %s: %v", svc, cfg.Bucket, err)
				case used:
					if _, err := kv.Get(ctx, "missing"); !errors.Is(err, jetstream.ErrKeyNotFound) {
						t.Errorf("%s get on %s: %v, want key not found", svc, cfg.Bucket, err)
					}
					_, perr := kv.Put(ctx, "probe-"+svc, []byte("x"))
					if write && perr != nil {
						t.Errorf("%s cannot write %s: %v", svc, cfg.Bucket, perr)
					}
					if !write && perr == nil {
						t.Errorf("%s wrote read-only %s", svc, cfg.Bucket)
					}
				}
				cancel()
			}
			objUses := map[string]bool{}
			for _, b := range access.ObjectStores {
				objUses[b.Bucket] = b.Write
			}
			for _, cfg := range a.topo.ObjectStores {
				write, used := objUses[cfg.Bucket]
				ctx, cancel := context.WithTimeout(ctx, timeoutFor(used))
				obs, err := js.ObjectStore(ctx, cfg.Bucket)
				switch {
				case !used && err == nil:
					t.Errorf("%s bound object store %s it does not use", svc, cfg.Bucket)
				case used && err != nil:
					t.Errorf("%s cannot bind object store %s: %v", svc, cfg.Bucket, err)
				case used:
					_, perr := obs.PutBytes(ctx, "probe-"+svc, []byte("x"))
					if write && perr != nil {
						t.Errorf("%s cannot write %s: %v", svc, cfg.Bucket, perr)
					}
					if !write && perr == nil {
						t.Errorf("%s wrote read-only %s", svc, cfg.Bucket)
					}
					if write {
						if got, err := obs.GetBytes(ctx, "probe-"+svc); err != nil || string(got) != "x" {
							t.Errorf("%s cannot read back %s: %q %v", svc, cfg.Bucket, got, err)
						}
					}
				}
				cancel()
			}

			// No JetStream admin rights.
			cctx, cancel := context.WithTimeout(ctx, timeoutFor(false))
			defer cancel()
			if _, err := js.CreateStream(cctx, jetstream.StreamConfig{Name: "EVIL_" + svc, Subjects: []string{"evil." + svc}}); err == nil {
				t.Errorf("%s created a stream", svc)
			}
			if err := js.DeleteStream(cctx, bus.StreamReceipts); err == nil {
				t.Errorf("%s deleted %s", svc, bus.StreamReceipts)
			}
		})
	}
}

// timeoutFor bounds a JetStream API call: a refused request is never answered, so it ends at
// its deadline; an allowed one gets the time a loaded machine needs.
func timeoutFor(allowed bool) time.Duration {
	if allowed {
		return 5 * time.Second
	}
	return 300 * time.Millisecond
}

// assertNotStored fails when the stream holding subject stored body under it.
func assertNotStored(t *testing.T, admin jetstream.JetStream, subject string, body []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	name, err := admin.StreamNameBySubject(ctx, subject)
	if err != nil {
		return // no stream captures it: nothing can be stored
	}
	st, err := admin.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, subject)
	if err == nil && bytes.Equal(m.Data, body) {
		t.Errorf("stream %s stored the forged %s", name, subject)
	}
}

// TestPermissions_subscriberReadsAlertsOnly: the subscriber receives anomalies and phase events
// and is refused the artifact store, state, every KV bucket, the resource events and receipts.
func TestPermissions_subscriberReadsAlertsOnly(t *testing.T) {
	t.Parallel()
	a := startAuthorized(t)
	ctx := t.Context()
	nc, js := a.connect(t, bus.IdentitySubscriber)

	sub, err := nc.SubscribeSync(bus.PrefixAnomaly + ">")
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	if _, err := a.admin.Publish(ctx, "lava.anomaly.critical.apply_failure", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(2 * time.Second); err != nil {
		t.Errorf("subscriber did not receive an anomaly: %v", err)
	}
	st, err := js.Stream(ctx, bus.StreamAnomalies)
	if err != nil {
		t.Fatalf("subscriber cannot read %s: %v", bus.StreamAnomalies, err)
	}
	if _, err := st.GetLastMsgForSubject(ctx, "lava.anomaly.critical.apply_failure"); err != nil {
		t.Errorf("subscriber cannot read the last anomaly: %v", err)
	}

	for _, cfg := range a.topo.KeyValues {
		cctx, cancel := context.WithTimeout(ctx, timeoutFor(false))
		if _, err := js.KeyValue(cctx, cfg.Bucket); err == nil {
			t.Errorf("subscriber bound KV bucket %s", cfg.Bucket)
		}
		cancel()
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := js.ObjectStore(cctx, bus.ObjectStoreArtifacts); err == nil {
		t.Errorf("subscriber bound the object store %s", bus.ObjectStoreArtifacts)
	}
	for _, s := range []string{bus.StreamResources, bus.StreamReceipts, bus.StreamCommands, "KV_" + bus.BucketState, "OBJ_" + bus.ObjectStoreArtifacts} {
		req := "$JS.API.STREAM.MSG.GET." + s
		if err := nc.PublishRequest(req, nc.NewInbox(), []byte(`{"seq":1}`)); err != nil {
			t.Fatal(err)
		}
		if !refused(nc, req) {
			t.Errorf("server did not refuse the subscriber reading %s", s)
		}
	}
	for _, s := range []string{"$O.>", "$KV.>", bus.PrefixResource + ">", bus.PrefixReceipt + ">", bus.PrefixCommand + ">"} {
		if _, err := nc.SubscribeSync(s); err != nil {
			t.Fatal(err)
		}
		if !refused(nc, s) {
			t.Errorf("server did not refuse the subscriber subscribing %s", s)
		}
	}
	for _, s := range lavaSubjects(t, a.topo) {
		if err := nc.Publish(s, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if !refused(nc, s) {
			t.Errorf("server did not refuse the subscriber publishing %s", s)
		}
	}
}

// TestPermissions_anonymousAndUnknownKeysAreRefused: no credentials, or a key the server does
// not list, cannot connect at all.
func TestPermissions_anonymousAndUnknownKeysAreRefused(t *testing.T) {
	t.Parallel()
	a := startAuthorized(t)
	if nc, err := nats.Connect(a.srv.URL()); err == nil {
		nc.Close()
		t.Fatal("anonymous connection accepted")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("anonymous connection: %v, want an authorization violation", err)
	}
	other := t.TempDir()
	if _, err := natsauth.GenerateDir(other); err != nil {
		t.Fatal(err)
	}
	if nc, _, err := bus.Connect(bus.ConnectOptions{URL: a.srv.URL(), NKeyFile: filepath.Join(other, natsauth.SeedFileName(bus.ServiceApplier))}); err == nil {
		nc.Close()
		t.Fatal("a connection with an unknown nkey was accepted")
	}
}

// TestConfig_isTheServersAuthorization: the printed block, in a nats-server configuration
// file, gives the server exactly the users of Users (same keys, same allow lists), and a
// server started from it refuses an anonymous client and accepts the bootstrap identity.
func TestConfig_isTheServersAuthorization(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys, err := natsauth.GenerateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	topo := bus.Declare(bus.TopologyOptions{})
	block, err := natsauth.Config(topo, keys)
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nats.conf")
	text := "listen: \"127.0.0.1:-1\"\njetstream { store_dir: \"" + filepath.Join(dir, "js") + "\" }\n" + block
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server rejects the generated configuration: %v\n%s", err, text)
	}
	want, err := natsauth.Users(topo, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Nkeys) != len(want) {
		t.Fatalf("server has %d nkey users, want %d", len(opts.Nkeys), len(want))
	}
	for i, u := range opts.Nkeys {
		w := want[i]
		if u.Nkey != w.Nkey || !slices.Equal(u.Permissions.Publish.Allow, w.Permissions.Publish.Allow) ||
			!slices.Equal(u.Permissions.Subscribe.Allow, w.Permissions.Subscribe.Allow) {
			t.Errorf("user %d: server has %+v %+v, want %+v %+v", i, u.Permissions.Publish, u.Permissions.Subscribe,
				w.Permissions.Publish, w.Permissions.Subscribe)
		}
	}
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server from the generated configuration not ready")
	}
	if nc, err := nats.Connect(srv.ClientURL()); err == nil {
		nc.Close()
		t.Error("server from the generated configuration accepted an anonymous client")
	}
	nc, _, err := bus.Connect(bus.ConnectOptions{URL: srv.ClientURL(), Identity: bus.IdentityBootstrap,
		NKeyFile: filepath.Join(dir, natsauth.SeedFileName(bus.IdentityBootstrap))})
	if err != nil {
		t.Fatalf("bootstrap identity refused: %v", err)
	}
	nc.Close()
}

func TestGenerateDir_seedsArePrivateAndKept(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "creds")
	first, err := natsauth.GenerateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range bus.Identities() {
		st, err := os.Stat(filepath.Join(dir, natsauth.SeedFileName(id)))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s seed has mode %v, want 0600", id, st.Mode().Perm())
		}
	}
	again, err := natsauth.GenerateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(first, again) {
		t.Error("a second GenerateDir changed the identities")
	}
	pub, err := natsauth.PublicKeyFile(filepath.Join(dir, natsauth.SeedFileName(bus.ServiceAttest)))
	if err != nil || pub != first[bus.ServiceAttest] {
		t.Errorf("PublicKeyFile = %q, %v; want %q", pub, err, first[bus.ServiceAttest])
	}
	if _, err := natsauth.Users(bus.Declare(bus.TopologyOptions{}), map[string]string{"mallory": pub}); err == nil {
		t.Error("Users accepted an unknown identity")
	}
}

// TestCheckTopology_servicesNameWhatIsMissing: before the bootstrap step every service, with
// its own identity (no admin rights), fails naming what it needs; after it, none fails.
func TestCheckTopology_servicesNameWhatIsMissing(t *testing.T) {
	t.Parallel()
	a := startEmpty(t)
	ctx := t.Context()
	for _, svc := range bus.Services() {
		_, js := a.connect(t, svc)
		err := bus.CheckTopology(ctx, js, svc, bus.TopologyOptions{})
		if !errors.Is(err, bus.ErrTopologyMissing) {
			t.Fatalf("%s before bootstrap: %v, want ErrTopologyMissing", svc, err)
		}
		if svc == bus.ServiceApplier {
			for _, want := range []string{"consumer applier on LAVA_PHASES", "kv bucket lava-state", "object store lava-artifacts"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("applier's error %q does not name %q", err, want)
				}
			}
		}
	}
	if err := bus.EnsureTopology(ctx, a.admin, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, svc := range bus.Services() {
		_, js := a.connect(t, svc)
		if err := bus.CheckTopology(ctx, js, svc, bus.TopologyOptions{}); err != nil {
			t.Errorf("%s after bootstrap: %v", svc, err)
		}
	}
}

// TestConnect_mutualTLS: on a server that requires TLS with client certificates and nkey
// identities, bus.Connect succeeds with the CA, a client certificate and the seed; it fails
// without TLS, with another CA, without a client certificate, and without the seed.
func TestConnect_mutualTLS(t *testing.T) {
	t.Parallel()
	pki := natstest.NewPKI(t)
	dir := t.TempDir()
	keys, err := natsauth.GenerateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	users, err := natsauth.Users(bus.Declare(bus.TopologyOptions{}), keys)
	if err != nil {
		t.Fatal(err)
	}
	seed := func(id string) string { return filepath.Join(dir, natsauth.SeedFileName(id)) }
	adminKey, err := nats.NkeyOptionFromSeed(seed(bus.IdentityBootstrap))
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Run(t, natstest.Config{
		Nkeys:  users,
		TLS:    pki.ServerTLS(t, true),
		Client: []nats.Option{adminKey, nats.RootCAs(pki.CAFile), nats.ClientCert(pki.ClientCert, pki.ClientKey)},
	})
	if err := bus.EnsureTopology(t.Context(), srv.JetStream(), bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	url := srv.URL()
	good := bus.ConnectOptions{URL: url, Identity: bus.ServiceApplier, NKeyFile: seed(bus.ServiceApplier),
		CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey}
	nc, js, err := bus.Connect(good)
	if err != nil {
		t.Fatalf("mutual TLS with the applier's identity: %v", err)
	}
	if !nc.TLSRequired() {
		t.Error("connection is not TLS")
	}
	if err := bus.CheckTopology(t.Context(), js, bus.ServiceApplier, bus.TopologyOptions{}); err != nil {
		t.Errorf("applier over mutual TLS: %v", err)
	}
	nc.Close()

	bad := map[string]func(o *bus.ConnectOptions){
		"no TLS":                  func(o *bus.ConnectOptions) { o.CAFile, o.CertFile, o.KeyFile = "", "", "" },
		"another CA":              func(o *bus.ConnectOptions) { o.CAFile = pki.OtherCAFile },
		"no client certificate":   func(o *bus.ConnectOptions) { o.CertFile, o.KeyFile = "", "" },
		"no nkey":                 func(o *bus.ConnectOptions) { o.NKeyFile = "" },
		"certificate without key": func(o *bus.ConnectOptions) { o.KeyFile = "" },
	}
	for name, mutate := range bad {
		o := good
		o.NoReconnect = true
		mutate(&o)
		if nc, _, err := bus.Connect(o); err == nil {
			nc.Close()
			t.Errorf("%s: connection accepted", name)
		}
	}
}
