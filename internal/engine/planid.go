package engine

import (
	"encoding/binary"
	"encoding/hex"
	"slices"

	"lukechampine.com/blake3"
)

// planIDDomain starts every plan id's input, so the hash can never collide with another Lava
// digest of the same bytes.
const planIDDomain = "lava.plan-id.v1"

// PlanID is the identity a plan is approved by: lowercase hex BLAKE3-256 over
//
//	str(planIDDomain) str(renderedJSONDigest) str(bindingsDigest) str(engineName)
//	str(engineVersion) u64(len(providerVersions)) { str(address) str(version) }*
//	u64(stateSerial) str(stateLineage)
//
// where u64(n) is n as 8 bytes big-endian, str(s) is u64(len(s)) followed by the bytes of s,
// and the provider versions are in ascending byte order of their addresses. The length prefixes
// make the encoding injective: two different argument lists never hash the same bytes.
// Any change of the rendered JSON, the bindings, the engine, a provider version or the state
// gives a new id, so an approval of one plan never applies another.
func PlanID(renderedJSONDigest, bindingsDigest, engineName, engineVersion string,
	providerVersions map[string]string, stateSerial uint64, stateLineage string) string {
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
	str(renderedJSONDigest)
	str(bindingsDigest)
	str(engineName)
	str(engineVersion)
	addrs := make([]string, 0, len(providerVersions))
	for a := range providerVersions {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	u64(uint64(len(addrs)))
	for _, a := range addrs {
		str(a)
		str(providerVersions[a])
	}
	u64(stateSerial)
	str(stateLineage)
	return hex.EncodeToString(h.Sum(nil))
}

// regressedDomain starts the input of [RegressedPlanID].
const regressedDomain = "lava.plan-id.regressed.v1"

// RegressedPlanID is the id of a plan made against a state that regressed since the apply of
// plan lastApplied: lowercase hex BLAKE3-256 over str(regressedDomain) str(planID)
// str(lastApplied), with str as in [PlanID]. The same configuration planned against an empty
// state before the first apply and after a wipe thus gets two different ids.
func RegressedPlanID(planID, lastApplied string) string {
	h := blake3.New(32, nil)
	var n [8]byte
	for _, s := range []string{regressedDomain, planID, lastApplied} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		_, _ = h.Write(n[:])
		_, _ = h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ComputePlanID returns [PlanID] of a record's fields, or [RegressedPlanID] of it when
// Target.RegressedFrom is set.
func (p *PlanRecord) ComputePlanID() string {
	id := PlanID(p.Target.RenderedDigest, p.BindingsDigest, p.Engine, p.EngineVersion,
		p.ProviderVersions, p.StateSerial, p.StateLineage)
	if p.Target.RegressedFrom != "" {
		return RegressedPlanID(id, p.Target.RegressedFrom)
	}
	return id
}
