//go:build integration

package embedded

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/engine/tofu"
)

// tofuEngine returns the tofu engine over the same state store and artifacts as e, so a
// resource's state moves between the two engines.
func (e *env) tofuEngine() *tofu.Engine {
	e.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	var h http.Handler = state.NewHandler(e.store, state.HandlerOptions{Password: "pw"})
	if log := debugLogger(); log != nil {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			inner.ServeHTTP(w, r)
			log.Debug("backend request", "method", r.Method, "path", r.URL.Path, "duration", time.Since(start))
		})
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	e.t.Cleanup(func() { _ = srv.Close() })
	eng, err := tofu.New(tofu.Config{
		Bin: e.tools.Bin, CLIConfigFile: e.tools.CLIConfig, MirrorDir: e.tools.Mirror,
		PluginCacheDir: filepath.Join(e.t.TempDir(), "plugins"), WorkDir: e.t.TempDir(),
		BackendURL: "http://" + ln.Addr().String(), BackendPassword: "pw",
		Store: e.store, Artifacts: e.art,
		Timeouts: engine.Timeouts{Init: time.Minute, Plan: 2 * time.Minute, Apply: 2 * time.Minute, Destroy: 2 * time.Minute},
		Logger:   debugLogger(),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = eng.Close() })
	return eng
}

// debugLogger logs the tofu engine's steps with their durations when LAVA_ENGINE_DEBUG is
// set (as the tofu package's harness does); nil otherwise.
func debugLogger() *slog.Logger {
	if os.Getenv("LAVA_ENGINE_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// oracleInstances is how many resource instances oracleDoc has.
const oracleInstances = 8

// oracleDoc exercises what the embedded engine must encode exactly as Terraform does:
// dynamic values, count and for_each instances, sensitive attributes, outputs, both
// protocol versions.
func oracleDoc(t *testing.T, dir string) string {
	if err := os.WriteFile(dir+"/in.txt", []byte("read by a data source\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return jsonDoc(t, map[string]any{
		"resource": map[string]any{
			"terraform_data": map[string]any{
				"seed":  map[string]any{"input": map[string]any{"name": "lava", "n": 3, "tags": []any{"a", "b"}}},
				"count": map[string]any{"count": 2, "input": "n-${count.index}", "triggers_replace": "${terraform_data.seed.id}"},
			},
			"local_file": map[string]any{
				"each": map[string]any{"for_each": map[string]any{"x": "1", "y": "2"},
					"filename": dir + "/each-${each.key}.txt", "content": "${each.value} ${terraform_data.seed.output.name}"},
				"secret": map[string]any{"filename": dir + "/secret.txt", "sensitive_content": "hush"},
				"copy":   map[string]any{"filename": dir + "/copy.txt", "content": "${data.local_file.in.content}"},
			},
			"testkit_file": map[string]any{"t": map[string]any{"filename": dir + "/t.txt", "content": "${local_file.each[\"x\"].id}"}},
		},
		"data": map[string]any{"local_file": map[string]any{"in": map[string]any{"filename": dir + "/in.txt"}}},
		"output": map[string]any{
			"in":   map[string]any{"value": "${data.local_file.in.content}"},
			"seed": map[string]any{"value": "${terraform_data.seed.output}"},
			"t":    map[string]any{"value": "${testkit_file.t.id}"},
		},
	})
}

// TestEngine_tofuOracle is the correctness oracle: what the embedded engine applies, tofu
// plans as unchanged; and what tofu applies, the embedded engine plans as unchanged.
func TestEngine_tofuOracle(t *testing.T) {
	e := newEnv(t)
	tf := e.tofuEngine()

	t.Run("embedded then tofu", func(t *testing.T) {
		e.key = state.Key{Namespace: "demo", Name: "embedded-first"}
		doc := oracleDoc(t, t.TempDir())
		if _, err := e.planApply(doc); err != nil {
			t.Fatalf("embedded apply: %v", err)
		}
		rec, err := tf.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
		if err != nil {
			t.Fatalf("tofu plan: %v", err)
		}
		if rec.HasChanges {
			t.Errorf("tofu plans changes after the embedded apply: %+v %v", rec.Summary, actionsOf(rec))
		}
		if n := len(actionsOf(rec)); n != oracleInstances {
			t.Errorf("tofu planned %d instances, want %d: %v", n, oracleInstances, actionsOf(rec))
		}
		// And tofu can destroy what the embedded engine created.
		res, err := tf.Destroy(t.Context(), engine.DestroyRequest{Target: e.target(doc)})
		if err != nil {
			t.Fatalf("tofu destroy: %v", err)
		}
		if res.Destroyed != oracleInstances {
			t.Errorf("tofu destroyed %d, want %d", res.Destroyed, oracleInstances)
		}
	})

	t.Run("tofu then embedded", func(t *testing.T) {
		e.key = state.Key{Namespace: "demo", Name: "tofu-first"}
		doc := oracleDoc(t, t.TempDir())
		rec, err := tf.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
		if err != nil {
			t.Fatalf("tofu plan: %v", err)
		}
		if _, err := tf.Apply(t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"}); err != nil {
			t.Fatalf("tofu apply: %v", err)
		}
		rec, err = e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
		if err != nil {
			t.Fatalf("embedded plan: %v", err)
		}
		if rec.HasChanges {
			t.Errorf("embedded plans changes after the tofu apply: %+v %v", rec.Summary, actionsOf(rec))
		}
		if n := len(actionsOf(rec)); n != oracleInstances {
			t.Errorf("embedded planned %d instances, want %d: %v", n, oracleInstances, actionsOf(rec))
		}
		res, err := e.eng.Destroy(t.Context(), engine.DestroyRequest{Target: e.target(doc)})
		if err != nil {
			t.Fatalf("embedded destroy: %v", err)
		}
		if res.Destroyed != oracleInstances {
			t.Errorf("embedded destroyed %d, want %d", res.Destroyed, oracleInstances)
		}
	})
}

// TestEngine_importOracle: an import block imported by the embedded engine leaves the state
// tofu would have written (tofu plans no changes and sees the same id), and the other way
// round.
func TestEngine_importOracle(t *testing.T) {
	e := newEnv(t)
	tf := e.tofuEngine()
	doc := jsonDoc(t, map[string]any{
		"import":   []any{map[string]any{"to": "terraform_data.x", "id": "imported-1"}},
		"resource": map[string]any{"terraform_data": map[string]any{"x": map[string]any{}}},
	})
	idOf := func() string {
		for _, r := range e.state().Resources {
			for _, in := range r.Instances {
				var m map[string]any
				_ = json.Unmarshal(in.Attributes, &m)
				s, _ := m["id"].(string)
				return s
			}
		}
		return ""
	}
	for _, order := range []struct {
		name         string
		first, check engine.Engine
	}{{"embedded then tofu", e.eng, tf}, {"tofu then embedded", tf, e.eng}} {
		t.Run(order.name, func(t *testing.T) {
			e.key = state.Key{Namespace: "demo", Name: strings.ReplaceAll(order.name, " ", "-")}
			rec, err := order.first.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
			if err != nil {
				t.Fatalf("%s plan: %v", order.first.Name(), err)
			}
			if !rec.HasChanges {
				t.Errorf("%s: an import plans no changes", order.first.Name())
			}
			if _, err := order.first.Apply(t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"}); err != nil {
				t.Fatalf("%s apply: %v", order.first.Name(), err)
			}
			if id := idOf(); id != "imported-1" {
				t.Errorf("%s imported id %q", order.first.Name(), id)
			}
			rec, err = order.check.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
			if err != nil {
				t.Fatalf("%s plan: %v", order.check.Name(), err)
			}
			if rec.HasChanges {
				t.Errorf("%s plans changes after %s imported: %+v %v", order.check.Name(), order.first.Name(), rec.Summary, actionsOf(rec))
			}
		})
	}
}

// TestEngine_movedRemovedOracle: a moved block and a removed block (no lifecycle: the object
// is kept) carried out by one engine leave a state the other plans as unchanged; the removed
// file still exists either way.
func TestEngine_movedRemovedOracle(t *testing.T) {
	e := newEnv(t)
	tf := e.tofuEngine()
	for _, order := range []struct {
		name         string
		first, check engine.Engine
	}{{"embedded then tofu", e.eng, tf}, {"tofu then embedded", tf, e.eng}} {
		t.Run(order.name, func(t *testing.T) {
			e.key = state.Key{Namespace: "demo", Name: "moved-" + strings.ReplaceAll(order.name, " ", "-")}
			dir := t.TempDir()
			kept := filepath.Join(dir, "kept.txt")
			before := jsonDoc(t, map[string]any{"resource": map[string]any{
				"terraform_data": map[string]any{"a": map[string]any{"input": "x"}},
				"local_file":     map[string]any{"gone": map[string]any{"filename": kept, "content": "keep me"}},
			}})
			// The provider of the removed resource stays required, so tofu can read its state.
			after := jsonDoc(t, map[string]any{
				"terraform": map[string]any{"required_providers": map[string]any{"local": map[string]any{"source": "hashicorp/local"}}},
				"moved":     []any{map[string]any{"from": "terraform_data.a", "to": "terraform_data.b"}},
				"removed":   []any{map[string]any{"from": "local_file.gone"}},
				"resource":  map[string]any{"terraform_data": map[string]any{"b": map[string]any{"input": "x"}}},
			})
			for _, doc := range []string{before, after} {
				rec, err := order.first.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
				if err != nil {
					t.Fatalf("%s plan: %v", order.first.Name(), err)
				}
				if _, err := order.first.Apply(t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"}); err != nil {
					t.Fatalf("%s apply: %v", order.first.Name(), err)
				}
			}
			if _, err := os.Stat(kept); err != nil {
				t.Errorf("%s destroyed the removed file: %v", order.first.Name(), err)
			}
			var addrs []string
			for _, r := range e.state().Resources {
				addrs = append(addrs, r.Type+"."+r.Name)
			}
			if len(addrs) != 1 || addrs[0] != "terraform_data.b" {
				t.Errorf("%s state holds %v, want [terraform_data.b]", order.first.Name(), addrs)
			}
			rec, err := order.check.Plan(t.Context(), engine.PlanRequest{Target: e.target(after)})
			if err != nil {
				t.Fatalf("%s plan: %v", order.check.Name(), err)
			}
			if rec.HasChanges {
				t.Errorf("%s plans changes after %s: %+v %v", order.check.Name(), order.first.Name(), rec.Summary, actionsOf(rec))
			}
		})
	}
}

// TestEngine_applyValidatesOracle: a value unknown at plan time is validated by the provider
// when it becomes known at apply, before the object is created, as tofu does (hashicorp/local
// checks file_permission): both engines fail the apply with the provider's message, create
// the terraform_data the value comes from, and neither creates the file.
func TestEngine_applyValidatesOracle(t *testing.T) {
	e := newEnv(t)
	tf := e.tofuEngine()
	for _, eng := range []engine.Engine{e.eng, tf} {
		t.Run(eng.Name(), func(t *testing.T) {
			e.key = state.Key{Namespace: "demo", Name: "apply-validates-" + eng.Name()}
			file := filepath.Join(t.TempDir(), "f.txt")
			doc := jsonDoc(t, map[string]any{"resource": map[string]any{
				"terraform_data": map[string]any{"mode": map[string]any{"input": "abc"}},
				"local_file": map[string]any{"f": map[string]any{"filename": file, "content": "x",
					"file_permission": "${terraform_data.mode.output}"}},
			}})
			rec, err := eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
			if err != nil {
				t.Fatalf("plan: %v (the value is unknown at plan time: the plan must pass)", err)
			}
			_, err = eng.Apply(t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"})
			if err == nil || !strings.Contains(err.Error(), "bad mode for file") {
				t.Fatalf("apply error = %v, want the provider's validation error (bad mode for file)", err)
			}
			if _, err := os.Stat(file); !os.IsNotExist(err) {
				t.Errorf("the file was created despite its invalid configuration (stat: %v)", err)
			}
			if got := strings.Join(addresses(e.state()), " "); got != "terraform_data.mode" {
				t.Errorf("state holds %q, want only terraform_data.mode", got)
			}
		})
	}
}
