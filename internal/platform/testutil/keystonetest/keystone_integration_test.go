//go:build integration && providers

package keystonetest

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestStart: the admin can create, read and delete a project through the identity API.
func TestStart(t *testing.T) {
	k := Start(t)
	code, body := k.Do(t, http.MethodPost, "/projects", map[string]any{"project": map[string]any{"name": "keystonetest", "domain_id": "default"}})
	if code != http.StatusCreated {
		t.Fatalf("create project: %d %s", code, body)
	}
	var p struct {
		Project struct {
			ID string `json:"id"`
		} `json:"project"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Project.ID == "" {
		t.Fatalf("create project: %v %s", err, body)
	}
	if code, body := k.Do(t, http.MethodGet, "/projects/"+p.Project.ID, nil); code != http.StatusOK {
		t.Fatalf("get project: %d %s", code, body)
	}
	if code, body := k.Do(t, http.MethodDelete, "/projects/"+p.Project.ID, nil); code != http.StatusNoContent {
		t.Fatalf("delete project: %d %s", code, body)
	}
}
