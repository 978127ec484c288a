package embedded

import (
	"context"

	"github.com/lava-operator/lava/internal/engine"
)

// fileCheck is the tenant policy's file-access check of one operation's configuration
// ([engine.FileAccess.Check] of the object's namespace and rendered document), run by
// [Runner.Plan] with the session's provider schemas before any provider reads or writes
// anything for it (docs/design/0022-file-access-from-schemas.md).
type fileCheck func(ctx context.Context, schemas engine.Schemas) error

type fileCheckKey struct{}

// withFileCheck carries the operation's file-access check to [Runner.Plan]; a nil fa (no
// policy) carries none.
func withFileCheck(ctx context.Context, fa *engine.FileAccess, namespace string, rendered []byte) context.Context {
	if fa == nil {
		return ctx
	}
	return context.WithValue(ctx, fileCheckKey{}, fileCheck(func(ctx context.Context, schemas engine.Schemas) error {
		return fa.Check(ctx, namespace, rendered, schemas)
	}))
}

func fileCheckFrom(ctx context.Context) fileCheck {
	f, _ := ctx.Value(fileCheckKey{}).(fileCheck)
	return f
}

// sessionSchemas are the schemas of a session's providers, for [engine.FileAccess.Check]: the
// providers the plan uses anyway (started, checked against their locks and configured once).
type sessionSchemas struct{ s *session }

// FileSchema implements [engine.Schemas].
func (ss sessionSchemas) FileSchema(ctx context.Context, ref string, kind engine.SchemaKind, typ string) (string, *engine.FileBlock, error) {
	c, addr, err := ss.s.provider(ctx, ref)
	if err != nil {
		return "", nil, err
	}
	ps, err := c.Schema(ctx)
	if err != nil {
		return "", nil, err
	}
	schemas := ps.Resources
	if kind == engine.DataSchema {
		schemas = ps.DataSources
	}
	sch, ok := schemas[typ]
	if !ok || sch == nil {
		return addr.String(), nil, nil
	}
	return addr.String(), fileBlock(sch.Block, false), nil
}

// fileBlock converts a schema block for the file check (keyed: it nests as a map).
func fileBlock(b *Block, keyed bool) *engine.FileBlock {
	out := &engine.FileBlock{Attributes: map[string]*engine.FileAttribute{}, Blocks: map[string]*engine.FileBlock{}, Keyed: keyed}
	if b == nil {
		return out
	}
	for name, a := range b.Attributes {
		fa := &engine.FileAttribute{Type: a.Type, Required: a.Required}
		if a.NestedType != nil {
			fa.Nested = fileBlock(&Block{Attributes: a.NestedType.Attributes}, a.NestedType.Nesting == NestingMap)
		}
		out.Attributes[name] = fa
	}
	for name, nb := range b.BlockTypes {
		out.Blocks[name] = fileBlock(&nb.Block, nb.Nesting == NestingMap)
	}
	return out
}
