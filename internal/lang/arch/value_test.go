package arch

import (
	"fmt"
	"testing"
)

// Keys returns the keys in insertion order (a copy); nil for a nil Map.
func (m *Map) Keys() []string {
	if m == nil {
		return nil
	}
	keys := make([]string, len(m.entries))
	for i, e := range m.entries {
		keys[i] = e.key
	}
	return keys
}

func TestMap_orderAndLastWins(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, mapIndexMin, mapIndexMin + 1, 50} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			var m Map
			var want []string
			for i := range n {
				k := fmt.Sprintf("k%02d", n-i) // descending: insertion order, not sorted
				m.Set(k, Int(int64(i)))
				want = append(want, k)
			}
			// Overwrite every other key: position kept, value replaced.
			for i := 0; i < n; i += 2 {
				m.Set(want[i], String("new"))
			}
			if got := m.Keys(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("keys = %v, want %v", got, want)
			}
			if m.Len() != n {
				t.Errorf("Len = %d, want %d", m.Len(), n)
			}
			for i, k := range want {
				v, ok := m.Get(k)
				if !ok {
					t.Fatalf("Get(%s) missing", k)
				}
				if i%2 == 0 && v.Str != "new" || i%2 == 1 && v.Int != int64(i) {
					t.Errorf("Get(%s) = %+v", k, v)
				}
			}
			if _, ok := m.Get("absent"); ok {
				t.Error("Get(absent) found")
			}
			i := 0
			for k := range m.All() {
				if k != want[i] {
					t.Errorf("All()[%d] = %s, want %s", i, k, want[i])
				}
				i++
			}
		})
	}
	var nilMap *Map
	if nilMap.Len() != 0 || nilMap.Keys() != nil {
		t.Error("nil map is not empty")
	}
	if _, ok := nilMap.Get("x"); ok {
		t.Error("nil map Get found a key")
	}
}
