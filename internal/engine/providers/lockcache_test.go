package providers

import (
	"reflect"
	"strings"
	"testing"
)

// TestLockCache: a kept parse equals ParseLock's; each caller gets its own copy (changing one
// changes neither the cache nor another caller's); a bad file is an error and not kept; the
// cache empties itself rather than grow past maxParsedLocks bytes.
func TestLockCache(t *testing.T) {
	var c lockCache
	body := Lock{"registry.opentofu.org/hashicorp/local": {Version: "1.4.0", Hashes: []string{"h1:a=", "zh:b"}}}.Write()
	want, err := ParseLock(body)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.parse(body)
	if err != nil {
		t.Fatal(err)
	}
	a["registry.opentofu.org/hashicorp/local"].Hashes[0] = "h1:changed="
	a["registry.opentofu.org/example/other"] = LockEntry{Version: "9.9.9"}
	b, err := c.parse(body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b, want) {
		t.Errorf("second parse %+v, want %+v (a caller's change reached the cache)", b, want)
	}
	if c.Len() != 1 {
		t.Errorf("cache holds %d parses of one file, want 1", c.Len())
	}
	if _, err := c.parse([]byte("provider {")); err == nil {
		t.Error("a malformed lock parsed without an error")
	}
	if c.Len() != 1 {
		t.Errorf("cache holds %d parses after a malformed file, want 1", c.Len())
	}
	// A file over the bound is parsed, not kept, and empties nothing.
	huge := Lock{"registry.opentofu.org/hashicorp/local": {Version: "1.4.0", Hashes: []string{"h1:" + strings.Repeat("y", maxParsedLocks)}}}
	if _, err := c.parse(huge.Write()); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 1 {
		t.Errorf("cache holds %d parses after one over the bound, want the 1 it had", c.Len())
	}
	big := Lock{"registry.opentofu.org/hashicorp/local": {Version: "1.4.0", Hashes: []string{"h1:" + strings.Repeat("x", maxParsedLocks/3)}}}
	for i := range 4 {
		e := big["registry.opentofu.org/hashicorp/local"]
		e.Version = "1.4." + string(rune('0'+i))
		big["registry.opentofu.org/hashicorp/local"] = e
		if _, err := c.parse(big.Write()); err != nil {
			t.Fatal(err)
		}
		if c.Bytes() > maxParsedLocks {
			t.Fatalf("cache grew to %d bytes, bound %d", c.Bytes(), maxParsedLocks)
		}
	}
}
