package engine

import (
	"encoding/binary"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"

	"lukechampine.com/blake3"
)

// planIDDomain starts every plan id's input, so the hash can never collide with another Lava
// digest of the same bytes. v2 added the state digest, the per-address actions and the
// review digest.
const planIDDomain = "lava.plan-id.v2"

// PlanIDInput is what a plan id covers: the inputs (rendered JSON, bindings, engine, provider
// versions), the state planned against (serial, lineage and the artifact digest of its body)
// and what the plan does (the action per resource address and the digest of the reviewable
// plan body, when the engine produced one).
type PlanIDInput struct {
	RenderedDigest, BindingsDigest string
	Engine, EngineVersion          string
	// ProviderVersions maps provider addresses to versions.
	ProviderVersions map[string]string
	StateSerial      uint64
	StateLineage     string
	// StateDigest is the state.Record digest of the body planned against ("" for no state).
	StateDigest string
	// Resources are the planned actions per instance address (any order).
	Resources []ResourceAction
	// ReviewDigest is the artifact digest of the plan's reviewable body
	// ([PlanRecord.ReviewDigest]; "" when none was made).
	ReviewDigest string
}

// PlanID is the identity a plan is approved by: lowercase hex BLAKE3-256 over
//
//	str(planIDDomain) str(renderedDigest) str(bindingsDigest) str(engine) str(engineVersion)
//	u64(len(providerVersions)) { str(address) str(version) }*
//	u64(stateSerial) str(stateLineage) str(stateDigest)
//	u64(len(resources)) { str(address) str(action) }* str(reviewDigest)
//
// where u64(n) is n as 8 bytes big-endian, str(s) is u64(len(s)) followed by the bytes of s,
// provider versions are in ascending byte order of their addresses and resources in ascending
// byte order of address, then action. The length prefixes make the encoding injective: two
// different inputs never hash the same bytes. Any change of the rendered JSON, the bindings,
// the engine, a provider version, the state (even a body rewritten at the same serial) or a
// planned action gives a new id, so an approval of one plan never applies another.
func PlanID(in PlanIDInput) string {
	h := blake3.New(32, nil)
	var n [8]byte
	u64 := func(v uint64) {
		binary.BigEndian.PutUint64(n[:], v)
		_, _ = h.Write(n[:])
	}
	str := func(s string) {
		u64(uint64(len(s)))
		_, _ = h.Write([]byte(s))
	}
	str(planIDDomain)
	str(in.RenderedDigest)
	str(in.BindingsDigest)
	str(in.Engine)
	str(in.EngineVersion)
	addrs := make([]string, 0, len(in.ProviderVersions))
	for a := range in.ProviderVersions {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	u64(uint64(len(addrs)))
	for _, a := range addrs {
		str(a)
		str(in.ProviderVersions[a])
	}
	u64(in.StateSerial)
	str(in.StateLineage)
	str(in.StateDigest)
	res := slices.Clone(in.Resources)
	slices.SortFunc(res, func(a, b ResourceAction) int {
		if c := strings.Compare(a.Address, b.Address); c != 0 {
			return c
		}
		return strings.Compare(string(a.Action), string(b.Action))
	})
	u64(uint64(len(res)))
	for _, r := range res {
		str(r.Address)
		str(string(r.Action))
	}
	str(in.ReviewDigest)
	return hex.EncodeToString(h.Sum(nil))
}

// Domains of the ids [derivedPlanID] makes.
const (
	regressedDomain = "lava.plan-id.regressed.v1"
	repeatedDomain  = "lava.plan-id.repeated.v1"
)

// derivedPlanID is the id a plan of id planID gets of its own after the apply of plan
// lastApplied: lowercase hex BLAKE3-256 over str(domain) str(planID) str(lastApplied), with str
// as in [PlanID].
func derivedPlanID(domain, planID, lastApplied string) string {
	h := blake3.New(32, nil)
	var n [8]byte
	for _, s := range []string{domain, planID, lastApplied} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		_, _ = h.Write(n[:])
		_, _ = h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// RegressedPlanID is the id of a plan made against a state that regressed since the apply of
// plan lastApplied: lowercase hex BLAKE3-256 over str(regressedDomain) str(planID)
// str(lastApplied), with str as in [PlanID]. The same configuration planned against an empty
// state before the first apply and after a wipe thus gets two different ids.
func RegressedPlanID(planID, lastApplied string) string {
	return derivedPlanID(regressedDomain, planID, lastApplied)
}

// RepeatedPlanID is the id of a plan whose id planID was applied already, made after the apply
// of plan lastApplied (the object's newest applied plan): lowercase hex BLAKE3-256 over
// str(repeatedDomain) str(planID) str(lastApplied), with str as in [PlanID]. The same drift
// corrected a second and a third time thus gets two ids of their own, neither the first
// correction's, whose approval its apply spent.
func RepeatedPlanID(planID, lastApplied string) string {
	return derivedPlanID(repeatedDomain, planID, lastApplied)
}

// ComputePlanID returns [PlanID] of a record's fields; of that, [RegressedPlanID] when
// Target.RegressedFrom is set; of that, [RepeatedPlanID] when Target.RepeatedAfter is set.
func (p *PlanRecord) ComputePlanID() string {
	id := p.unrepeatedID()
	if p.Target.RepeatedAfter != "" {
		return RepeatedPlanID(id, p.Target.RepeatedAfter)
	}
	return id
}

// unrepeatedID is [PlanRecord.ComputePlanID] without Target.RepeatedAfter.
func (p *PlanRecord) unrepeatedID() string {
	id := PlanID(PlanIDInput{RenderedDigest: p.Target.RenderedDigest, BindingsDigest: p.BindingsDigest,
		Engine: p.Engine, EngineVersion: p.EngineVersion, ProviderVersions: p.ProviderVersions,
		StateSerial: p.StateSerial, StateLineage: p.StateLineage, StateDigest: p.StateDigest,
		Resources: p.Resources, ReviewDigest: p.ReviewDigest})
	if p.Target.RegressedFrom != "" {
		return RegressedPlanID(id, p.Target.RegressedFrom)
	}
	return id
}

// OwnID gives p the id it has after the applies of the object's plans (applied: their ids,
// oldest first): Target.RepeatedAfter is the newest of them when p's id without it is among
// them, else "", and PlanID is [PlanRecord.ComputePlanID] of that. A plan that repeats an
// applied one thus gets an id of its own, one per newest applied plan, which no approval named
// before.
func (p *PlanRecord) OwnID(applied []string) {
	p.Target.RepeatedAfter = ""
	if id := p.unrepeatedID(); slices.Contains(applied, id) {
		p.Target.RepeatedAfter = applied[len(applied)-1]
	}
	p.PlanID = p.ComputePlanID()
}

// HasOwnID reports whether p's PlanID is the one [PlanRecord.OwnID] gives it with applied:
// false for a plan held since its own id was applied, or since another plan was applied after
// the one it repeats, and for a record whose id is not that of its fields.
func (p *PlanRecord) HasOwnID(applied []string) bool {
	c := *p
	c.OwnID(applied)
	return c.PlanID == p.PlanID
}

// planIDPattern is the form of a plan id: [PlanID]'s BLAKE3-256 digest in lower-case hexadecimal.
var planIDPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// IsPlanID reports whether s has the form of a plan id (64 lower-case hexadecimal digits), as
// spec.approvePlan names one.
func IsPlanID(s string) bool { return planIDPattern.MatchString(s) }
