package contentcache_test

import (
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/platform/contentcache"
)

// TestCache: a kept value comes back; a key is kept once; a key over maxKey is not kept and
// empties nothing; the keys never pass maxBytes: the cache empties itself first.
func TestCache(t *testing.T) {
	var c contentcache.Cache[int]
	if _, ok := c.Get([]byte("a")); ok {
		t.Fatal("the zero cache has a value")
	}
	c.Put([]byte("a"), 1, 4, 10)
	c.Put([]byte("a"), 2, 4, 10)
	if v, ok := c.Get([]byte("a")); !ok || v != 1 || c.Len() != 1 || c.Bytes() != 1 {
		t.Errorf("after two puts of one key: %d %v, %d keys, %d bytes; want 1, 1 key, 1 byte", v, ok, c.Len(), c.Bytes())
	}
	c.Put([]byte("toolong"), 3, 4, 10)
	if _, ok := c.Get([]byte("toolong")); ok || c.Len() != 1 {
		t.Errorf("a key over maxKey was kept, or emptied the cache (%d keys)", c.Len())
	}
	for i := range 6 {
		c.Put([]byte(strings.Repeat(string(rune('b'+i)), 3)), i, 4, 10)
		if c.Bytes() > 10 {
			t.Fatalf("keys grew to %d bytes, bound 10", c.Bytes())
		}
	}
	if _, ok := c.Get([]byte("a")); ok {
		t.Error("the first key survived the cache filling up")
	}
}
