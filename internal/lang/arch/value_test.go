package arch

import (
	"fmt"
	"testing"
)

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

func TestValue_MarshalJSON(t *testing.T) {
	t.Parallel()
	m := NewMap()
	m.Set("b", List(String("<x>"), RefValue(ResourceRef{Type: "aws_vpc", Name: "v", Attribute: "id"})))
	m.Set("a", MapValue(nil))
	m.Set("n", Null())
	m.Set("f", Float(1.5))
	m.Set("t", Bool(true))
	got, err := MapValue(m).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"b":["<x>","${aws_vpc.v.id}"],"a":{},"n":null,"f":1.5,"t":true}`; string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
