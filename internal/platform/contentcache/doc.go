// Package contentcache keeps what was derived from content (a parse, a decoded value) under the
// content itself, bounded by the bytes of content kept.
//
// A [Cache] maps a key, the content's bytes, to a value of type V. A key longer than the
// maxKey bytes a Put is given is not kept; when keeping one more key would take the keys past
// maxBytes bytes, the cache is emptied first. Nothing expires otherwise: the same content
// always derives the same value, so a kept value is never stale. The zero Cache is empty and
// ready; it is safe for concurrent use. Values are shared between callers: keep only values
// nobody changes, or hand out copies.
package contentcache
