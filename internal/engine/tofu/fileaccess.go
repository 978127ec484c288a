package tofu

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/providers"
)

// builtinAddr is the address of the CLI's built-in provider (terraform_data).
const builtinAddr = "terraform.io/builtin/terraform"

// maxSchemas bounds the provider schemas the engine keeps; when full, they are dropped.
const maxSchemas = 64

// verifyMirror checks every provider package of the workspace's dependency lock that the CLI
// installed from the mirror before any of them runs: it must be a package the mirror held when
// the engine started, unchanged ([providers.Pins]), and its h1: hash one the lock records (the
// CLI records the package it installed). So an executable planted in the mirror, or a package
// added or changed there since, never runs, for an object with a lock or without one
// (docs/security.md, "Engines"). `init` runs no provider.
func (e *Engine) verifyMirror(r *run) error {
	if e.cfg.MirrorDir == "" {
		return nil
	}
	lock, err := e.workspaceLock(r)
	if err != nil {
		return err
	}
	for _, addr := range slices.Sorted(maps.Keys(lock)) {
		en := lock[addr]
		pkg := filepath.Join(e.cfg.MirrorDir, filepath.FromSlash(addr), en.Version, runtime.GOOS+"_"+runtime.GOARCH)
		if _, err := os.Stat(pkg); err != nil {
			continue // not installed from the mirror
		}
		if err := e.pins.Verify(addr, en.Version, pkg); err != nil {
			return err
		}
		h1, err := e.hashes.Hash(pkg)
		if err != nil {
			return err
		}
		if recorded := h1Hashes(en.Hashes); len(recorded) > 0 && !slices.Contains(recorded, h1) {
			return &providers.PinError{Addr: addr, Version: en.Version, Dir: pkg,
				Why: fmt.Sprintf("it hashes to %s, the CLI installed %v", h1, recorded)}
		}
	}
	return nil
}

// workspaceLock reads the workspace's dependency lock file (what init selected and verified);
// an empty lock when there is none.
func (e *Engine) workspaceLock(r *run) (providers.Lock, error) {
	b, err := os.ReadFile(filepath.Join(r.dir, lockFile))
	if errors.Is(err, os.ErrNotExist) {
		return providers.Lock{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", e.cfg.Name, lockFile, err)
	}
	lock, err := providers.ParseLock(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.cfg.Name, err)
	}
	return lock, nil
}

func h1Hashes(hs []string) []string {
	return slices.DeleteFunc(slices.Clone(hs), func(h string) bool { return !strings.HasPrefix(h, "h1:") })
}

// checkFiles applies the tenant policy's file rule (engine.FileAccess) to the workspace's
// configuration with its providers' schemas, after init and before any provider reads or
// plans anything.
func (e *Engine) checkFiles(ctx context.Context, r *run, ws *workspace, t engine.Target) error {
	if e.cfg.FileAccess == nil {
		return nil
	}
	return e.cfg.FileAccess.Check(ctx, t.Key.Namespace, ws.rendered, &workspaceSchemas{e: e, r: r, ws: ws})
}

// workspaceSchemas are the schemas of a workspace's providers for engine.FileAccess: from the
// engine's cache, keyed by each provider package's address, version and hashes in the
// workspace's dependency lock, else from one `providers schema -json` of the workspace.
type workspaceSchemas struct {
	e    *Engine
	r    *run
	ws   *workspace
	lock providers.Lock
	// all is what this operation's `providers schema -json` returned (nil before).
	all *tfjson.ProviderSchemas
}

// FileSchema implements [engine.Schemas].
func (s *workspaceSchemas) FileSchema(ctx context.Context, ref string, kind engine.SchemaKind, typ string) (string, *engine.FileBlock, error) {
	local, _, _ := strings.Cut(ref, ".")
	addr := builtinAddr
	if local != "terraform" {
		addr = s.e.lockAddr("hashicorp/" + local)
		for _, req := range s.ws.reqs {
			if req.Name == local {
				addr = s.e.lockAddr(req.Source)
			}
		}
	}
	ps, err := s.schema(ctx, addr)
	if err != nil || ps == nil {
		return addr, nil, err
	}
	schemas := ps.ResourceSchemas
	if kind == engine.DataSchema {
		schemas = ps.DataSourceSchemas
	}
	if sch, ok := schemas[typ]; ok && sch != nil {
		return addr, fileBlock(sch.Block, false), nil
	}
	return addr, nil, nil
}

// schema returns the provider addr's schema (nil when the CLI reports none).
func (s *workspaceSchemas) schema(ctx context.Context, addr string) (*tfjson.ProviderSchema, error) {
	if s.lock == nil {
		l, err := s.e.workspaceLock(s.r)
		if err != nil {
			return nil, err
		}
		s.lock = l
	}
	if s.all != nil {
		return s.all.Schemas[addr], nil
	}
	s.e.mu.Lock()
	ps, ok := s.e.schemas[s.key(addr)]
	s.e.mu.Unlock()
	if ok {
		return ps, nil
	}
	if err := s.r.step(ctx, "providers schema", s.e.cfg.Timeouts.Show, func(ctx context.Context) error {
		var err error
		s.all, err = s.r.tf.ProvidersSchema(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	if s.e.schemas == nil || len(s.e.schemas)+len(s.all.Schemas) > maxSchemas {
		s.e.schemas = map[string]*tfjson.ProviderSchema{}
	}
	for a, p := range s.all.Schemas {
		s.e.schemas[s.key(a)] = p
	}
	return s.all.Schemas[addr], nil
}

// key names a provider package in the engine's schema cache: its address, and the version
// and hashes the workspace's dependency lock records for it.
func (s *workspaceSchemas) key(addr string) string {
	if en, ok := s.lock[addr]; ok {
		return addr + "@" + en.Version + "#" + strings.Join(slices.Sorted(slices.Values(en.Hashes)), ",")
	}
	return addr
}

// fileBlock converts a schema block for the file check (keyed: it nests as a map).
func fileBlock(b *tfjson.SchemaBlock, keyed bool) *engine.FileBlock {
	out := &engine.FileBlock{Attributes: map[string]*engine.FileAttribute{}, Blocks: map[string]*engine.FileBlock{}, Keyed: keyed}
	if b == nil {
		return out
	}
	for name, a := range b.Attributes {
		fa := &engine.FileAttribute{Type: a.AttributeType, Required: a.Required}
		if n := a.AttributeNestedType; n != nil {
			fa.Nested = fileBlock(&tfjson.SchemaBlock{Attributes: n.Attributes}, n.NestingMode == tfjson.SchemaNestingModeMap)
		}
		out.Attributes[name] = fa
	}
	for name, nb := range b.NestedBlocks {
		out.Blocks[name] = fileBlock(nb.Block, nb.NestingMode == tfjson.SchemaNestingModeMap)
	}
	return out
}
