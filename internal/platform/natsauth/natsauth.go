// Package natsauth turns the bus's generated permissions (bus.Topology.Permissions) into NATS
// authorization: one nkey user per identity (the seven services, the subscriber and the
// bootstrap admin), their seed files, the users of an in-process nats-server, and the
// nats-server `authorization` block for a server run from a configuration file (the chart's
// NATS). It writes no crypto of its own: keys are github.com/nats-io/nkeys (ed25519), and the
// server checks them (nkey challenge on connect) and enforces the allow lists.
package natsauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/lava-operator/lava/internal/platform/bus"
)

// SeedFileName is the file of identity's nkey seed in a credentials directory ("applier.nk").
func SeedFileName(identity string) string { return identity + ".nk" }

// GenerateDir writes a fresh nkey user seed for every identity of bus.Identities() that has
// none yet into dir (created 0700), each as SeedFileName(identity) with mode 0600, and
// returns the public keys of all of them (existing seeds are kept, so a restart keeps its
// identities). Errors: the directory or a seed cannot be written or read.
func GenerateDir(dir string) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("natsauth: %w", err)
	}
	for _, id := range bus.Identities() {
		path := filepath.Join(dir, SeedFileName(id))
		if _, err := os.Stat(path); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("natsauth: %w", err)
		}
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, fmt.Errorf("natsauth: new nkey for %s: %w", id, err)
		}
		seed, err := kp.Seed()
		if err != nil {
			return nil, fmt.Errorf("natsauth: seed of %s: %w", id, err)
		}
		if err := os.WriteFile(path, append(seed, '\n'), 0o600); err != nil {
			return nil, fmt.Errorf("natsauth: write %s: %w", path, err)
		}
	}
	return PublicKeysDir(dir, bus.Identities()...)
}

// PublicKeysDir reads the seeds SeedFileName(id) of identities from dir and returns their
// public keys (identity -> "U..."). Errors name the identity whose seed is missing or invalid.
func PublicKeysDir(dir string, identities ...string) (map[string]string, error) {
	keys := make(map[string]string, len(identities))
	for _, id := range identities {
		pub, err := PublicKeyFile(filepath.Join(dir, SeedFileName(id)))
		if err != nil {
			return nil, fmt.Errorf("natsauth: identity %s: %w", id, err)
		}
		keys[id] = pub
	}
	return keys, nil
}

// PublicKeyFile returns the public key of the nkey user seed in path (a seed file as
// GenerateDir writes it, or "nsc"'s: the first line starting with "SU"), or the key itself
// when path holds a public user key ("U..."), so the printer needs no seed.
func PublicKeyFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "SU"):
			kp, err := nkeys.FromSeed([]byte(line))
			if err != nil {
				return "", fmt.Errorf("%s: %w", path, err)
			}
			return kp.PublicKey()
		case nkeys.IsValidPublicUserKey(line):
			return line, nil
		}
	}
	return "", fmt.Errorf("%s: no nkey user seed (SU...) or public user key (U...)", path)
}

// Users returns the nkey users of an in-process nats-server (server.Options.Nkeys) for keys
// (identity -> public key), each with t.Permissions(identity) as its allow lists. Errors: an
// unknown identity, an invalid public key.
func Users(t bus.Topology, keys map[string]string) ([]*server.NkeyUser, error) {
	var users []*server.NkeyUser
	for _, id := range bus.Identities() {
		pub, ok := keys[id]
		if !ok {
			continue
		}
		if !nkeys.IsValidPublicUserKey(pub) {
			return nil, fmt.Errorf("natsauth: identity %s: %q is not a public nkey user key", id, pub)
		}
		p, err := t.Permissions(id)
		if err != nil {
			return nil, err
		}
		users = append(users, &server.NkeyUser{Nkey: pub, Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: p.Publish},
			Subscribe: &server.SubjectPermission{Allow: p.Subscribe},
		}})
	}
	for id := range keys {
		if _, err := t.Permissions(id); err != nil {
			return nil, err
		}
	}
	return users, nil
}

// confUser is one entry of the authorization block's users.
type confUser struct {
	Nkey        string   `json:"nkey"`
	Permissions confPerm `json:"permissions"`
}

type confPerm struct {
	Publish   confAllow `json:"publish"`
	Subscribe confAllow `json:"subscribe"`
}

type confAllow struct {
	Allow []string `json:"allow"`
}

// Config returns the nats-server configuration block "authorization { users: [...] }" for
// keys (identity -> public key), one nkey user per identity with its generated allow lists,
// and no default user (an anonymous client is refused). Every string is quoted (JSON syntax,
// which the nats-server configuration format accepts), so "$JS..." is never read as a
// variable. The block holds public keys only; the seeds stay with the services.
func Config(t bus.Topology, keys map[string]string) (string, error) {
	users, err := Users(t, keys)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# Generated by `lava nats authorization` from the bus topology (internal/platform/bus).\n")
	b.WriteString("authorization {\n  users: [\n")
	for i, u := range users {
		id := identityOf(keys, u.Nkey)
		var data strings.Builder
		enc := json.NewEncoder(&data)
		enc.SetEscapeHTML(false) // ">" stays ">": the configuration format has no \u escapes
		enc.SetIndent("    ", "  ")
		if err := enc.Encode(confUser{Nkey: u.Nkey, Permissions: confPerm{
			Publish:   confAllow{Allow: u.Permissions.Publish.Allow},
			Subscribe: confAllow{Allow: u.Permissions.Subscribe.Allow},
		}}); err != nil {
			return "", fmt.Errorf("natsauth: %w", err)
		}
		fmt.Fprintf(&b, "    # %s\n    %s", id, strings.TrimSuffix(data.String(), "\n"))
		if i < len(users)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String(), nil
}

func identityOf(keys map[string]string, pub string) string {
	for id, k := range keys {
		if k == pub {
			return id
		}
	}
	return ""
}
