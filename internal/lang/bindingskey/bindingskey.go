// Package bindingskey reads the installation's bindings key: the BLAKE3 key that keeps secret
// binding values out of digests (internal/lang/render's bindingsDigest, the watcher's trigger
// digest). It is its own package so the watcher reads the key without linking the renderer.
package bindingskey

import (
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// Size is the size in bytes of a bindings key.
const Size = 32

// Read reads a bindings key file: 32 raw bytes, or 64 hex digits (surrounding
// blank space ignored).
func Read(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bindings key: %w", err)
	}
	if len(b) == Size {
		return b, nil
	}
	if k, err := hex.DecodeString(strings.TrimSpace(string(b))); err == nil && len(k) == Size {
		return k, nil
	}
	return nil, fmt.Errorf("bindings key %s: want %d raw bytes or %d hex digits", path, Size, 2*Size)
}
