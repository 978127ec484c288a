package embedded

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"github.com/zclconf/go-cty/cty/msgpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TerraformVersion is the version Lava reports to providers (ConfigureProvider) and writes as
// terraform_version in state. It is the OpenTofu release the tofu engine is tested with, so
// either engine reads the other's state.
const TerraformVersion = "1.12.6"

// Diagnostic is one warning or error from a provider. Summary and Detail are the provider's
// own words; Lava never puts attribute values in them.
type Diagnostic struct {
	Error   bool
	Summary string
	Detail  string
	// Attribute is the dotted path the diagnostic is about, if any.
	Attribute string
}

// DiagnosticsError is the error a provider call returns when the provider reported errors.
type DiagnosticsError struct {
	// Op is the RPC: "PlanResourceChange", ...
	Op    string
	Diags []Diagnostic
}

func (e *DiagnosticsError) Error() string {
	var parts []string
	for _, d := range e.Diags {
		if !d.Error {
			continue
		}
		s := d.Summary
		if d.Detail != "" {
			s += ": " + d.Detail
		}
		if d.Attribute != "" {
			s += " (attribute " + d.Attribute + ")"
		}
		parts = append(parts, s)
	}
	return strings.ToLower(e.Op[:1]) + e.Op[1:] + ": " + strings.Join(parts, "; ")
}

func diagsErr(op string, diags []Diagnostic) error {
	for _, d := range diags {
		if d.Error {
			return &DiagnosticsError{Op: op, Diags: diags}
		}
	}
	return nil
}

// PlanResult is what PlanResourceChange answers.
type PlanResult struct {
	Planned         cty.Value
	RequiresReplace []cty.Path
	PlannedPrivate  []byte
	// LegacyTypeSystem is set by SDKv2 providers, whose plans may be inconsistent in ways
	// Terraform tolerates.
	LegacyTypeSystem bool
	// PlannedIdentity is the resource identity the provider planned (protocol 5.9/6.9), as it
	// sent it; empty when it sent none. Decoded only where needed ([RawValue.Decode] with the
	// type's [IdentitySchema]), so a plan that needs no identity never asks for the schema.
	PlannedIdentity RawValue
}

// RawValue is a value as a provider sent it: MessagePack or JSON of a type the caller knows.
type RawValue struct {
	MsgPack, JSON []byte
}

// Empty reports whether the provider sent no value.
func (r RawValue) Empty() bool { return len(r.MsgPack) == 0 && len(r.JSON) == 0 }

// Decode decodes the value as ty; an empty RawValue decodes to null.
func (r RawValue) Decode(ty cty.Type) (cty.Value, error) { return decode(r.MsgPack, r.JSON, ty) }

// IdentitySchema is a managed resource type's identity schema (plugin protocol 5.9/6.9): the
// attributes that name one object for good, versioned apart from the resource schema.
type IdentitySchema struct {
	// Version is the identity schema version (not the resource schema's).
	Version int64
	// Attributes are the identity attributes' types by name.
	Attributes map[string]cty.Type
}

// ImpliedType is the object type of an identity of this schema.
func (s *IdentitySchema) ImpliedType() cty.Type { return cty.Object(s.Attributes) }

// identitySchemas holds a client's identity schemas, fetched once (nil map: the provider has
// none).
type identitySchemas struct {
	mu      sync.Mutex
	fetched bool
	schemas map[string]*IdentitySchema
}

// get returns the identity schema of typeName, calling fetch the first time; a fetch error
// is returned and the next call tries again.
func (c *identitySchemas) get(typeName string, fetch func() (map[string]*IdentitySchema, error)) (*IdentitySchema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fetched {
		m, err := fetch()
		if err != nil {
			return nil, err
		}
		c.schemas, c.fetched = m, true
	}
	return c.schemas[typeName], nil
}

// unimplemented reports a gRPC Unimplemented answer: a provider before protocol 5.9/6.9 asked
// for identity schemas.
func unimplemented(err error) bool { return status.Code(err) == codes.Unimplemented }

// identityAttributeType decodes an identity attribute's JSON-encoded cty type.
func identityAttributeType(name string, b []byte) (cty.Type, error) {
	ty, err := ctyjson.UnmarshalType(b)
	if err != nil {
		return cty.NilType, fmt.Errorf("identity attribute %s: type: %w", name, err)
	}
	return ty, nil
}

// Client is a started provider, version independent. Values passed in and returned are of
// the implied type of the schema named by typeName (the provider schema for config calls).
// Every method is safe for concurrent use, as the protocol allows.
type Client interface {
	// Schema returns the provider's schemas (cached after the first call).
	Schema(ctx context.Context) (*ProviderSchema, error)
	// ValidateProviderConfig checks the provider configuration and returns it (protocol 5
	// providers may fill in defaults).
	ValidateProviderConfig(ctx context.Context, config cty.Value) (cty.Value, error)
	// Configure configures the provider; it must precede resource calls.
	Configure(ctx context.Context, config cty.Value) error
	ValidateResourceConfig(ctx context.Context, typeName string, config cty.Value) error
	ValidateDataResourceConfig(ctx context.Context, typeName string, config cty.Value) error
	// UpgradeResourceState converts a stored JSON state of schema version `version`.
	UpgradeResourceState(ctx context.Context, typeName string, version int64, rawJSON []byte) (cty.Value, error)
	// ReadResource refreshes; a null result means the object no longer exists.
	ReadResource(ctx context.Context, typeName string, state cty.Value, private []byte) (cty.Value, []byte, error)
	// ReadResourceIdentity is ReadResource with the object's current resource identity (a
	// value of the type's identity schema; cty.NilVal for none), as Terraform reads an object
	// it has just imported by identity.
	ReadResourceIdentity(ctx context.Context, typeName string, state cty.Value, private []byte, identity cty.Value) (cty.Value, []byte, error)
	PlanResourceChange(ctx context.Context, typeName string, prior, proposed, config cty.Value, priorPrivate []byte) (PlanResult, error)
	// ApplyResourceChange applies; on error the returned state (possibly non-null) is what
	// the provider says exists now.
	ApplyResourceChange(ctx context.Context, typeName string, prior, planned, config cty.Value, plannedPrivate []byte) (cty.Value, []byte, error)
	ReadDataSource(ctx context.Context, typeName string, config cty.Value) (cty.Value, error)
	// ImportResourceState reads the existing object with the import id; the object of
	// typeName is returned (a provider may return others too: they are not imported).
	ImportResourceState(ctx context.Context, typeName, id string) (cty.Value, []byte, error)
	// IdentitySchema returns typeName's resource identity schema, nil (and no error) when the
	// provider has none for it, or none at all (a provider before protocol 5.9/6.9 answers
	// GetResourceIdentitySchemas Unimplemented). The provider is asked once.
	IdentitySchema(ctx context.Context, typeName string) (*IdentitySchema, error)
	// ImportResourceIdentity is ImportResourceState by resource identity (a value of the type's
	// identity schema) instead of an import id; the result is the import's stub, to be read
	// (ReadResource) for the object.
	ImportResourceIdentity(ctx context.Context, typeName string, identity cty.Value) (cty.Value, []byte, error)
	// Stop asks the provider to cancel in-flight work.
	Stop(ctx context.Context) error
	// ProtocolVersion is 5 or 6.
	ProtocolVersion() int
}

// ErrUnknownType reports a resource or data source type the provider does not have.
var ErrUnknownType = errors.New("provider has no such type")

// sameValue reports whether a and b are the same value (RawEquals); cty.NilVal is the same
// only as itself.
func sameValue(a, b cty.Value) bool {
	if a == cty.NilVal || b == cty.NilVal {
		return a == cty.NilVal && b == cty.NilVal
	}
	return a.RawEquals(b)
}

func encode(v cty.Value, ty cty.Type) ([]byte, error) {
	if v == cty.NilVal {
		v = cty.NullVal(ty)
	}
	b, err := msgpack.Marshal(v, ty)
	if err != nil {
		return nil, fmt.Errorf("encode value: %w", err)
	}
	return b, nil
}

func decode(mp, js []byte, ty cty.Type) (cty.Value, error) {
	switch {
	case len(mp) > 0:
		v, err := msgpack.Unmarshal(mp, ty)
		if err != nil {
			return cty.NilVal, fmt.Errorf("decode msgpack value: %w", err)
		}
		return v, nil
	case len(js) > 0:
		v, err := ctyjson.Unmarshal(js, ty)
		if err != nil {
			return cty.NilVal, fmt.Errorf("decode json value: %w", err)
		}
		return v, nil
	default:
		return cty.NullVal(ty), nil
	}
}

func resourceSchema(ps *ProviderSchema, typeName string) (*Schema, error) {
	s, ok := ps.Resources[typeName]
	if !ok {
		return nil, fmt.Errorf("resource type %q: %w", typeName, ErrUnknownType)
	}
	return s, nil
}

func dataSchema(ps *ProviderSchema, typeName string) (*Schema, error) {
	s, ok := ps.DataSources[typeName]
	if !ok {
		return nil, fmt.Errorf("data source type %q: %w", typeName, ErrUnknownType)
	}
	return s, nil
}
