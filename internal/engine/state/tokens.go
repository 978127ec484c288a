package state

import (
	"crypto/rand"
	"crypto/subtle"
	"sync"
)

// Tokens are per-operation passwords of the http backend: the engine issues one for the
// resource it works on before it starts tofu and revokes it when the operation ends, so a
// password seen by that operation (tofu, its providers) reaches only that resource's state and
// only while the operation runs (docs/security.md, "Engines"). Safe for concurrent use; the
// zero value is not usable, use [NewTokens].
type Tokens struct {
	mu sync.Mutex
	m  map[string]Key
}

// NewTokens returns an empty token set.
func NewTokens() *Tokens { return &Tokens{m: map[string]Key{}} }

// Issue returns a new random token (crypto/rand.Text) valid for key until [Tokens.Revoke].
func (t *Tokens) Issue(key Key) string {
	tok := rand.Text()
	t.mu.Lock()
	t.m[tok] = key
	t.mu.Unlock()
	return tok
}

// Revoke ends a token.
func (t *Tokens) Revoke(tok string) {
	t.mu.Lock()
	delete(t.m, tok)
	t.mu.Unlock()
}

// Valid reports whether tok was issued for key and is not revoked.
func (t *Tokens) Valid(key Key, tok string) bool {
	t.mu.Lock()
	k, ok := t.m[tok]
	t.mu.Unlock()
	return ok && subtle.ConstantTimeCompare([]byte(k.String()), []byte(key.String())) == 1
}
