package render

import (
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// ReadBindingsKey reads a bindings key file: 32 raw bytes, or 64 hex digits (surrounding
// blank space ignored).
func ReadBindingsKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bindings key: %w", err)
	}
	if len(b) == BindingsKeySize {
		return b, nil
	}
	if k, err := hex.DecodeString(strings.TrimSpace(string(b))); err == nil && len(k) == BindingsKeySize {
		return k, nil
	}
	return nil, fmt.Errorf("bindings key %s: want %d raw bytes or %d hex digits", path, BindingsKeySize, 2*BindingsKeySize)
}
