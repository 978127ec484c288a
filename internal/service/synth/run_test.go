package synth_test

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/lava-operator/lava/internal/service/synth"
)

func TestReadBindingsKey(t *testing.T) {
	t.Parallel()
	raw := bytes.Repeat([]byte{0xab}, 32)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		path    string
		wantErr bool
	}{
		{"raw", write("raw", raw), false},
		{"hex with newline", write("hex", []byte(hex.EncodeToString(raw)+"\n")), false},
		{"short", write("short", raw[:16]), true},
		{"bad hex", write("bad", bytes.Repeat([]byte("zz"), 32)), true},
		{"missing", filepath.Join(dir, "none"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k, err := synth.ReadBindingsKey(tt.path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && !bytes.Equal(k, raw) {
				t.Errorf("key = %x", k)
			}
		})
	}
}
