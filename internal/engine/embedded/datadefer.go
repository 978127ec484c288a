package embedded

import "strings"

// dependsOnChanges reports whether a data resource must be read during apply rather than
// plan, as OpenTofu decides it (forcePlanReadData in its data source planning): a managed
// resource the data resource depends on — referenced directly in its configuration or named
// in depends_on, or any managed resource those depend on in turn — has a planned change
// other than no-op. Data resources in that set never count themselves (their own deferral
// comes from a managed one). The dependencies are planned before rc (the walk's order).
func (p *planner) dependsOnChanges(rc *ResourceConfig) bool {
	var direct []string
	for _, tr := range rc.refs {
		a, err := refAddress(tr)
		if err != nil || a == "" || strings.HasPrefix(a, "var.") || strings.HasPrefix(a, "local.") || strings.HasPrefix(a, "data.") {
			continue
		}
		direct = append(direct, a)
	}
	direct = append(direct, rc.DependsOn...)
	seen := map[string]bool{}
	var visit func(a string)
	visit = func(a string) {
		if seen[a] {
			return
		}
		seen[a] = true
		for _, d := range p.deps[a] {
			visit(d)
		}
	}
	for _, a := range direct {
		visit(a)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.changes {
		if c.Mode != "managed" || !seen[c.Res] {
			continue
		}
		switch c.Action {
		case NoOp, Read:
		case Forget:
			if c.Removed {
				return true
			}
		default:
			return true
		}
	}
	return false
}
