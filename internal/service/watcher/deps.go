package watcher

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// Field index names registered on the manager's cache.
const (
	// IndexPolicyRef indexes LavaArchitectures by spec.remediationPolicyRef.name.
	IndexPolicyRef = "lava.spec.remediationPolicyRef.name"
	// IndexDependsOn indexes LavaArchitectures by each spec.dependsOn target and each
	// spec.bindingsFrom outputsRef (an implied dependsOn), "namespace/name".
	IndexDependsOn = "lava.spec.dependsOn"
	// IndexEdgeFrom indexes LavaArchitectureDependencies by spec.from, "namespace/name" (only
	// edges whose from is in this watcher's cluster).
	IndexEdgeFrom = "lava.spec.from"
	// IndexEdgeTo indexes LavaArchitectureDependencies by spec.to, "namespace/name" (only edges
	// whose to is in this watcher's cluster).
	IndexEdgeTo = "lava.spec.to"
)

// maxCycleSearch bounds the number of resources a cycle search visits.
const maxCycleSearch = 512

// edge is one dependency of a resource.
type edge struct {
	target  types.NamespacedName
	cluster string
	kind    v1alpha1.DependencyKind
	require v1alpha1.Phase
	// refused says why a lockdown install refuses the edge (a cross-namespace reference);
	// empty when it is allowed.
	refused string
}

// dependsOnKeys are the IndexDependsOn values of a LavaArchitecture.
func dependsOnKeys(a *v1alpha1.LavaArchitecture) []string {
	var out []string
	for _, d := range a.Spec.DependsOn {
		out = append(out, dependsOnTarget(a.Namespace, d).String())
	}
	for _, t := range outputsRefTargets(a) {
		out = append(out, t.String())
	}
	return out
}

func dependsOnTarget(ns string, d v1alpha1.Dependency) types.NamespacedName {
	if d.Namespace != "" {
		ns = d.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: d.Name}
}

// refKey resolves an ArchitectureReference of an edge object in namespace ns; ok is false when
// it names another cluster than cluster.
func refKey(ns string, r v1alpha1.ArchitectureReference, cluster string) (types.NamespacedName, bool) {
	if r.Namespace != "" {
		ns = r.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: r.Name}, r.Cluster == "" || r.Cluster == cluster
}

// rank orders phases by how far along the pipeline they are, for "has reached": Synthesized 1,
// Planned 2, Applied and the phases after an apply (Drifted, Reconverging) 3, others 0.
func rank(p v1alpha1.Phase) int {
	switch p {
	case v1alpha1.PhaseSynthesized:
		return 1
	case v1alpha1.PhasePlanned:
		return 2
	case v1alpha1.PhaseApplied, v1alpha1.PhaseDrifted, v1alpha1.PhaseReconverging:
		return 3
	}
	return 0
}

// resolver computes dependency state from the cache.
type resolver struct {
	c       client.Reader
	cluster string
	// noCrossNamespace refuses every edge that crosses a namespace (lockdown; docs/security.md,
	// "Kubernetes RBAC").
	noCrossNamespace bool
}

// edges lists the dependencies of key: spec.dependsOn and the bindingsFrom outputsRef entries of
// spec (nil when the object does not exist) and the LavaArchitectureDependency objects whose from
// is key (with noCrossNamespace, only those of key's namespace).
func (r resolver) edges(ctx context.Context, key types.NamespacedName, spec *v1alpha1.LavaArchitectureSpec) ([]edge, error) {
	var out []edge
	if spec != nil {
		for _, d := range spec.DependsOn {
			req := d.Phase
			if req == "" {
				req = v1alpha1.PhaseApplied
			}
			e := edge{target: dependsOnTarget(key.Namespace, d), kind: v1alpha1.DependencyBlocksOn, require: req}
			if r.noCrossNamespace && e.target.Namespace != key.Namespace {
				e.refused = "spec.dependsOn names " + e.target.String() + " in another namespace"
			}
			out = append(out, e)
		}
		// spec.bindingsFrom outputsRef implies dependsOn the producer reaching Applied; it is
		// always in key's namespace (the reference has no namespace field).
		for _, b := range spec.BindingsFrom {
			if b.OutputsRef != nil {
				out = append(out, edge{target: types.NamespacedName{Namespace: key.Namespace, Name: b.OutputsRef.Name},
					kind: v1alpha1.DependencyBlocksOn, require: v1alpha1.PhaseApplied})
			}
		}
	}
	var list v1alpha1.LavaArchitectureDependencyList
	if err := r.c.List(ctx, &list, client.MatchingFields{IndexEdgeFrom: key.String()}); err != nil {
		return nil, fmt.Errorf("watcher: list dependencies of %s: %w", key, err)
	}
	for _, e := range list.Items {
		if r.noCrossNamespace && e.Namespace != key.Namespace {
			// Another namespace's edge object says nothing about key's object: refusing it would
			// let that namespace's tenant hold any object of this one.
			continue
		}
		to, _ := refKey(e.Namespace, e.Spec.To, r.cluster)
		kind := e.Spec.Kind
		if kind != v1alpha1.DependencyInfluences {
			kind = v1alpha1.DependencyBlocksOn
		}
		req := e.Spec.RequirePhase
		if req == "" {
			req = v1alpha1.PhaseApplied
		}
		cl := e.Spec.To.Cluster
		if cl == r.cluster {
			cl = ""
		}
		ed := edge{target: to, cluster: cl, kind: kind, require: req}
		if r.noCrossNamespace && to.Namespace != key.Namespace {
			ed.refused = fmt.Sprintf("LavaArchitectureDependency %s/%s links %s to %s across namespaces", e.Namespace, e.Name, key, to)
		}
		out = append(out, ed)
	}
	slices.SortFunc(out, func(a, b edge) int {
		return cmp.Or(cmp.Compare(a.cluster, b.cluster), cmp.Compare(a.target.Namespace, b.target.Namespace),
			cmp.Compare(a.target.Name, b.target.Name), cmp.Compare(a.kind, b.kind), cmp.Compare(a.require, b.require))
	})
	return slices.Compact(out), nil
}

// get reads a LavaArchitecture from the cache; nil when it does not exist.
func (r resolver) get(ctx context.Context, key types.NamespacedName) (*v1alpha1.LavaArchitecture, error) {
	var a v1alpha1.LavaArchitecture
	if err := r.c.Get(ctx, key, &a); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("watcher: get dependency %s: %w", key, err)
	}
	return &a, nil
}

// depState is the resolved dependency state of one resource.
type depState struct {
	proto *lavav1.DependencyState
	// waiting names the unsatisfied BlocksOn dependencies ("infra/a to reach Applied").
	waiting []string
	// cycle is a BlocksOn cycle through the resource, starting at it; empty when none.
	cycle []types.NamespacedName
	// refused lists the cross-namespace references a lockdown install refuses.
	refused []string
}

// has reports whether the resource has any dependency at all.
func (s depState) has() bool { return len(s.proto.GetDependencies()) > 0 }

// message is the DependenciesReady condition message when not ready.
func (s depState) message() string {
	if len(s.refused) > 0 {
		return "cross-namespace references are refused by this installation (an admin allows them with --allow-cross-namespace-refs): " + strings.Join(s.refused, "; ")
	}
	if len(s.cycle) > 0 {
		parts := make([]string, 0, len(s.cycle)+1)
		for _, k := range s.cycle {
			parts = append(parts, k.String())
		}
		parts = append(parts, s.cycle[0].String())
		return "dependency cycle: " + strings.Join(parts, " -> ")
	}
	return "waiting for " + strings.Join(s.waiting, ", ")
}

// resolve computes the dependency state of obj.
func (r resolver) resolve(ctx context.Context, obj *v1alpha1.LavaArchitecture) (depState, error) {
	self := client.ObjectKeyFromObject(obj)
	edges, err := r.edges(ctx, self, &obj.Spec)
	if err != nil {
		return depState{}, err
	}
	st := depState{proto: &lavav1.DependencyState{Ready: true}}
	for _, e := range edges {
		d := &lavav1.Dependency{
			Target:        &lavav1.ResourceRef{Namespace: e.target.Namespace, Name: e.target.Name},
			Cluster:       e.cluster,
			Kind:          lavav1.DependencyKind_DEPENDENCY_KIND_BLOCKS_ON,
			RequiredPhase: PhaseProto(e.require),
		}
		if e.kind == v1alpha1.DependencyInfluences {
			d.Kind = lavav1.DependencyKind_DEPENDENCY_KIND_INFLUENCES
		}
		why := ""
		if e.refused != "" {
			st.refused = append(st.refused, e.refused)
			st.proto.Ready = false
			st.proto.Dependencies = append(st.proto.Dependencies, d)
			continue // never read: the target is another namespace's
		}
		if e.cluster != "" {
			why = " (in cluster " + e.cluster + ", not observed by this watcher)"
		} else {
			t, err := r.get(ctx, e.target)
			if err != nil {
				return depState{}, err
			}
			switch {
			case t == nil:
				why = " (not found)"
			default:
				d.Target.Uid = string(t.UID)
				d.ObservedPhase = PhaseProto(t.Status.Phase)
				current := t.Status.ObservedGeneration == t.Generation
				d.Satisfied = current && rank(t.Status.Phase) >= rank(e.require)
			}
		}
		if e.kind == v1alpha1.DependencyInfluences {
			d.Satisfied = true
		}
		if !d.Satisfied {
			st.proto.Ready = false
			st.waiting = append(st.waiting, fmt.Sprintf("%s%s to reach %s", e.target, why, e.require))
		}
		st.proto.Dependencies = append(st.proto.Dependencies, d)
	}
	if len(edges) > 0 {
		cycle, err := r.findCycle(ctx, self, edges)
		if err != nil {
			return depState{}, err
		}
		if len(cycle) > 0 {
			st.cycle = cycle
			st.proto.Ready = false
			for _, k := range cycle {
				ref := &lavav1.ResourceRef{Namespace: k.Namespace, Name: k.Name}
				if k == self {
					ref.Uid = string(obj.UID)
				}
				st.proto.Cycle = append(st.proto.Cycle, ref)
			}
		}
	}
	return st, nil
}

// findCycle searches the BlocksOn graph depth-first from self (whose edges are given) for a
// path back to self, visiting at most maxCycleSearch resources, in sorted edge order so the
// reported cycle is deterministic. It returns the cycle's members starting at self.
func (r resolver) findCycle(ctx context.Context, self types.NamespacedName, selfEdges []edge) ([]types.NamespacedName, error) {
	visited := map[types.NamespacedName]bool{self: true}
	path := []types.NamespacedName{self}
	var walk func(edges []edge) (bool, error)
	walk = func(edges []edge) (bool, error) {
		for _, e := range edges {
			if e.kind != v1alpha1.DependencyBlocksOn || e.cluster != "" || e.refused != "" {
				continue
			}
			if e.target == self {
				return true, nil
			}
			if visited[e.target] || len(visited) >= maxCycleSearch {
				continue
			}
			visited[e.target] = true
			t, err := r.get(ctx, e.target)
			if err != nil {
				return false, err
			}
			var spec *v1alpha1.LavaArchitectureSpec
			if t != nil {
				spec = &t.Spec
			}
			next, err := r.edges(ctx, e.target, spec)
			if err != nil {
				return false, err
			}
			path = append(path, e.target)
			found, err := walk(next)
			if err != nil || found {
				return found, err
			}
			path = path[:len(path)-1]
		}
		return false, nil
	}
	found, err := walk(selfEdges)
	if err != nil || !found {
		return nil, err
	}
	return path, nil
}
