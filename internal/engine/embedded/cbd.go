package embedded

import "github.com/zclconf/go-cty/cty"

// forcedCreateBeforeDestroy returns the managed resources whose replacement must create
// first although their own lifecycle does not say so: every resource a resource with
// create_before_destroy depends on, directly or through other resources, data sources and
// locals (deps, by configuration address), as OpenTofu forces it (ForcedCBDTransformer): the
// dependent's new object needs the dependency's new object before the old ones go.
func forcedCreateBeforeDestroy(cfg *Config, deps map[string][]string) map[string]bool {
	forced := map[string]bool{}
	var visit func(addr string)
	visit = func(addr string) {
		for _, d := range deps[addr] {
			if forced[d] {
				continue
			}
			forced[d] = true
			visit(d)
		}
	}
	for _, rc := range cfg.Resources {
		if rc.Mode == "managed" && rc.CreateBeforeDestroy {
			visit(rc.Address())
		}
	}
	for _, rc := range cfg.Resources {
		if rc.Mode != "managed" || rc.CreateBeforeDestroy {
			delete(forced, rc.Address())
		}
	}
	return forced
}

// attributeSensitiveMark is the cty mark of a resource instance's sensitive attribute seen
// through a reference (markSensitive). Expressions that use it are sensitive like those of
// [sensitiveMark], with one difference: an output showing it without sensitive = true is
// hidden (recorded sensitive) where OpenTofu refuses the output, as the embedded engine did
// before it carried these marks (TestEngine_sensitiveAndDrift).
const attributeSensitiveMark = "sensitive-attribute"

// markSensitive marks the values at paths of v sensitive, as a reference to a resource
// instance sees them in OpenTofu: the attributes its schema marks and those its
// configuration made sensitive (instanceSensitivePaths), so expressions that use them are
// sensitive too (and resources that store them record them in sensitive_attributes).
func markSensitive(v cty.Value, paths []cty.Path) cty.Value {
	if len(paths) == 0 || v == cty.NilVal {
		return v
	}
	pvm := make([]cty.PathValueMarks, 0, len(paths))
	for _, p := range paths {
		pvm = append(pvm, cty.PathValueMarks{Path: p, Marks: cty.NewValueMarks(attributeSensitiveMark)})
	}
	return v.MarkWithPaths(pvm)
}

// hasMarkDeep reports whether v or any value inside it carries mark.
func hasMarkDeep(v cty.Value, mark string) bool {
	_, pvm := v.UnmarkDeepWithPaths()
	for _, pm := range pvm {
		if _, ok := pm.Marks[mark]; ok {
			return true
		}
	}
	return false
}
