package embedded

import (
	"encoding/json"
	"fmt"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"github.com/zclconf/go-cty/cty/msgpack"
)

// planFormat names the plan artifact's format.
const planFormat = "lava.embedded.plan/v1"

// planArtifact is the serialized plan the embedded engine stores in the artifact store: the
// planned changes with their values (MessagePack, so unknown values survive), and the state
// they were planned against.
type planArtifact struct {
	Format           string              `json:"format"`
	RenderedDigest   string              `json:"renderedDigest"`
	StateSerial      uint64              `json:"stateSerial"`
	StateLineage     string              `json:"stateLineage"`
	Destroy          bool                `json:"destroy,omitempty"`
	Deps             map[string][]string `json:"deps"`
	OutputsChanged   bool                `json:"outputsChanged,omitempty"`
	ProviderVersions map[string]string   `json:"providerVersions"`
	Changes          []changeJSON        `json:"changes"`
	Moves            []Move              `json:"moves,omitempty"`
}

type changeJSON struct {
	Addr                string   `json:"addr"`
	Res                 string   `json:"res"`
	Module              string   `json:"module,omitempty"`
	Mode                string   `json:"mode"`
	Type                string   `json:"type"`
	Name                string   `json:"name"`
	Key                 any      `json:"key,omitempty"`
	Action              Action   `json:"action"`
	ProviderKey         string   `json:"providerKey"`
	Provider            string   `json:"provider"`
	Each                string   `json:"each,omitempty"`
	CreateBeforeDestroy bool     `json:"createBeforeDestroy,omitempty"`
	ReplacePaths        []string `json:"replacePaths,omitempty"`
	Deposed             string   `json:"deposed,omitempty"`
	ImportID            string   `json:"importId,omitempty"`
	Removed             bool     `json:"removed,omitempty"`
	Reason              string   `json:"reason,omitempty"`
	// Marked is Change.Marked in state's sensitive_attributes encoding.
	Marked         json.RawMessage `json:"marked,omitempty"`
	Prior          *valueJSON      `json:"prior,omitempty"`
	Planned        *valueJSON      `json:"planned,omitempty"`
	PriorPrivate   []byte          `json:"priorPrivate,omitempty"`
	PlannedPrivate []byte          `json:"plannedPrivate,omitempty"`
}

type valueJSON struct {
	Type    json.RawMessage `json:"type"`
	Msgpack []byte          `json:"msgpack"`
}

func encodeValue(v cty.Value) (*valueJSON, error) {
	if v == cty.NilVal {
		return nil, nil
	}
	tb, err := ctyjson.MarshalType(v.Type())
	if err != nil {
		return nil, err
	}
	mp, err := msgpack.Marshal(v, v.Type())
	if err != nil {
		return nil, err
	}
	return &valueJSON{Type: tb, Msgpack: mp}, nil
}

func decodeValue(j *valueJSON) (cty.Value, error) {
	if j == nil {
		return cty.NilVal, nil
	}
	ty, err := ctyjson.UnmarshalType(j.Type)
	if err != nil {
		return cty.NilVal, err
	}
	return msgpack.Unmarshal(j.Msgpack, ty)
}

func marshalPlan(p *Plan, renderedDigest string, serial uint64, lineage string) ([]byte, error) {
	art := planArtifact{Format: planFormat, RenderedDigest: renderedDigest, StateSerial: serial, StateLineage: lineage,
		Destroy: p.Destroy, Deps: p.Deps, OutputsChanged: p.OutputsChanged, ProviderVersions: p.ProviderVersions, Moves: p.Moves}
	for _, c := range p.Changes {
		cj := changeJSON{Addr: c.Addr, Res: c.Res, Module: c.Module, Mode: c.Mode, Type: c.Type, Name: c.Name, Key: c.Key, Action: c.Action,
			ProviderKey: c.ProviderKey, Provider: c.Provider, Each: c.Each, CreateBeforeDestroy: c.CreateBeforeDestroy,
			ReplacePaths: c.ReplacePaths, Deposed: c.Deposed, ImportID: c.ImportID, Removed: c.Removed, Reason: c.Reason, PriorPrivate: c.PriorPrivate, PlannedPrivate: c.PlannedPrivate}
		if len(c.Marked) > 0 {
			cj.Marked = marshalPaths(c.Marked)
		}
		var err error
		if cj.Prior, err = encodeValue(c.Prior); err != nil {
			return nil, fmt.Errorf("plan artifact: %s: %w", c.Addr, err)
		}
		if sameValue(c.Planned, c.Prior) {
			cj.Planned = cj.Prior // an unchanged object: the same encoding
		} else if cj.Planned, err = encodeValue(c.Planned); err != nil {
			return nil, fmt.Errorf("plan artifact: %s: %w", c.Addr, err)
		}
		art.Changes = append(art.Changes, cj)
	}
	return json.Marshal(&art)
}

func unmarshalPlan(b []byte) (*planArtifact, *Plan, error) {
	var art planArtifact
	if err := json.Unmarshal(b, &art); err != nil {
		return nil, nil, fmt.Errorf("plan artifact: %w", err)
	}
	if art.Format != planFormat {
		return nil, nil, fmt.Errorf("plan artifact: format %q, want %q", art.Format, planFormat)
	}
	p := &Plan{Deps: art.Deps, OutputsChanged: art.OutputsChanged, ProviderVersions: art.ProviderVersions, Destroy: art.Destroy, Moves: art.Moves}
	for _, cj := range art.Changes {
		c := &Change{Addr: cj.Addr, Res: cj.Res, Module: cj.Module, Mode: cj.Mode, Type: cj.Type, Name: cj.Name, Key: normalizeKey(cj.Key),
			Action: cj.Action, ProviderKey: cj.ProviderKey, Provider: cj.Provider, Each: cj.Each,
			CreateBeforeDestroy: cj.CreateBeforeDestroy, ReplacePaths: cj.ReplacePaths, Deposed: cj.Deposed, ImportID: cj.ImportID, Removed: cj.Removed, Reason: cj.Reason,
			PriorPrivate: cj.PriorPrivate, PlannedPrivate: cj.PlannedPrivate}
		var err error
		if c.Marked, err = unmarshalPaths(cj.Marked); err != nil {
			return nil, nil, fmt.Errorf("plan artifact: %s: %w", c.Addr, err)
		}
		if c.Prior, err = decodeValue(cj.Prior); err != nil {
			return nil, nil, fmt.Errorf("plan artifact: %s: %w", c.Addr, err)
		}
		if c.Planned, err = decodeValue(cj.Planned); err != nil {
			return nil, nil, fmt.Errorf("plan artifact: %s: %w", c.Addr, err)
		}
		p.Changes = append(p.Changes, c)
	}
	return &art, p, nil
}
