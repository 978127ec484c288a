package state_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine/state"
)

func TestHandler(t *testing.T) {
	s, _ := newStore(t, state.Options{})
	srv := httptest.NewServer(state.NewHandler(s, state.HandlerOptions{Password: "pw"}))
	t.Cleanup(srv.Close)
	addr := state.Address(srv.URL, key)
	if want := srv.URL + "/state/team-a/web.prod"; addr != want {
		t.Fatalf("Address = %s, want %s", addr, want)
	}
	lock := func(id string) string {
		return `{"ID":"` + id + `","Operation":"OperationTypeApply","Who":"root@pod","Version":"1.12.6","Created":"2026-01-01T00:00:00Z"}`
	}
	steps := []struct {
		name, method, url, body, password string
		wantCode                          int
		wantBody                          string // substring
	}{
		{"wrong password", "GET", addr, "", "nope", 401, ""},
		{"no state yet", "GET", addr, "", "pw", 204, ""},
		{"bad key", "GET", srv.URL + "/state/Bad/x", "", "pw", 404, ""},
		{"first write", "POST", addr, string(body("L1", 1)), "pw", 200, ""},
		{"read back", "GET", addr, "", "pw", 200, `"lineage":"L1"`},
		{"lineage change", "POST", addr, string(body("L2", 2)), "pw", 409, "lineage"},
		{"serial backwards", "POST", addr, string(body("L1", 0)), "pw", 409, "serial"},
		{"not v4", "POST", addr, `{"version":3}`, "pw", 400, ""},
		{"lock", "LOCK", addr, lock("A"), "pw", 200, ""},
		{"lock again by another", "LOCK", addr, lock("B"), "pw", 423, `"ID":"A"`},
		{"write without the lock id", "POST", addr, string(body("L1", 2)), "pw", 423, `"ID":"A"`},
		{"write with another lock id", "POST", addr + "?ID=B", string(body("L1", 2)), "pw", 423, `"ID":"A"`},
		{"write with the lock id", "POST", addr + "?ID=A", string(body("L1", 2)), "pw", 200, ""},
		{"unlock by another", "UNLOCK", addr, lock("B"), "pw", 409, `"ID":"A"`},
		{"unlock", "UNLOCK", addr, lock("A"), "pw", 200, ""},
		{"lock after unlock", "LOCK", addr, lock("B"), "pw", 200, ""},
		{"delete is refused", "DELETE", addr, "", "pw", 405, ""},
		{"read still there", "GET", addr, "", "pw", 200, `"serial":2`},
	}
	for _, st := range steps {
		req, err := http.NewRequestWithContext(t.Context(), st.method, st.url, strings.NewReader(st.body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("replica-1", st.password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != st.wantCode || !strings.Contains(string(b), st.wantBody) {
			t.Fatalf("%s: %s %s = %d %s, want %d containing %q", st.name, st.method, st.url, resp.StatusCode, b, st.wantCode, st.wantBody)
		}
		if st.wantCode == 423 {
			var li struct{ ID, Who string }
			if err := json.Unmarshal(b, &li); err != nil || !strings.Contains(li.Who, "replica-1") {
				t.Fatalf("%s: lock info %s (%v) should name the holder replica-1", st.name, b, err)
			}
		}
	}
	r, err := s.Get(t.Context(), key)
	if err != nil || r.Lock == nil || r.Lock.ID != "B" || r.Lock.Holder != "replica-1" || r.Serial != 2 {
		t.Fatalf("record %+v, %v", r, err)
	}
}

// TestHandler_tokens: with per-operation tokens a password reaches only the resource it was
// issued for and only until it is revoked (docs/security.md, "Engines").
func TestHandler_tokens(t *testing.T) {
	s, _ := newStore(t, state.Options{})
	tokens := state.NewTokens()
	srv := httptest.NewServer(state.NewHandler(s, state.HandlerOptions{Password: "static", Tokens: tokens}))
	t.Cleanup(srv.Close)
	other := state.Key{Namespace: "team-b", Name: "db"}
	tok := tokens.Issue(key)
	get := func(k state.Key, password string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, state.Address(srv.URL, k), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("op", password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name     string
		key      state.Key
		password string
		want     int
	}{
		{"its resource", key, tok, http.StatusNoContent},
		{"another resource", other, tok, http.StatusUnauthorized},
		{"the static password no longer works", key, "static", http.StatusUnauthorized},
		{"a guessed token", key, "not-a-token", http.StatusUnauthorized},
	} {
		if got := get(tc.key, tc.password); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
	tokens.Revoke(tok)
	if got := get(key, tok); got != http.StatusUnauthorized {
		t.Errorf("revoked token: status %d, want 401", got)
	}
}
