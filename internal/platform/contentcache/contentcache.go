package contentcache

import "sync"

// Cache maps content to a value derived from it; see the package documentation.
type Cache[V any] struct {
	mu    sync.Mutex
	m     map[string]V
	bytes int
}

// Get returns the value kept for key, if any.
func (c *Cache[V]) Get(key []byte) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[string(key)]
	return v, ok
}

// Put keeps v for key unless key is longer than maxKey bytes or already kept; the cache is
// emptied first when keeping key would take its keys past maxBytes bytes.
func (c *Cache[V]) Put(key []byte, v V, maxKey, maxBytes int) {
	if len(key) > maxKey || len(key) > maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[string(key)]; ok {
		return
	}
	if c.m == nil || c.bytes+len(key) > maxBytes {
		c.m, c.bytes = map[string]V{}, 0
	}
	c.m[string(key)] = v
	c.bytes += len(key)
}

// Len is the number of keys kept.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Bytes is the total length of the keys kept, in bytes.
func (c *Cache[V]) Bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
