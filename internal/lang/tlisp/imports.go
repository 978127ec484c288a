package tlisp

// ImportDecl is a (deflava-import TARGET :as ALIAS :bindings (:k "v" ...)) form.
// Like upstream lava-eval, Lava only reads it: no composition is performed.
type ImportDecl struct {
	// Target is the imported architecture's name (a symbol or string).
	Target string
	// Alias is the :as name ("" when absent).
	Alias string
	// Bindings are the :bindings pairs with string values, in source order.
	Bindings []ImportBinding
	Pos      Pos
}

// ImportBinding is one key/value pair of an import's :bindings.
type ImportBinding struct {
	Key, Value string
}

// ReadImports reads every deflava-import form of src. A form without a target is an error;
// pairs of :bindings that are not :keyword "string" are skipped, as upstream does.
func ReadImports(src []byte, opts Options) (imports []ImportDecl, diags Diagnostics) {
	defer func() {
		if r := recover(); r != nil {
			imports = nil
			diags = append(diags, internalError(opts.File, r))
		}
	}()
	forms, pdiags, usable := parse(src, opts)
	if !usable {
		return nil, pdiags
	}
	e := newEvaluator(src, opts)
	e.diags, e.nerr = pdiags, len(pdiags.Errors())
	for _, f := range forms {
		if f.Head() != "deflava-import" {
			continue
		}
		xs := f.List
		if len(xs) < 2 || (xs[1].Kind != NodeSymbol && xs[1].Kind != NodeString) {
			e.errorf(at(f, 1), "expected deflava-import form (deflava-import TARGET :as ALIAS :bindings (:key \"value\" ...))")
			continue
		}
		im := ImportDecl{Target: xs[1].Text, Pos: f.Pos}
		for i := 2; i+1 < len(xs); i += 2 {
			if xs[i].Kind != NodeKeyword {
				continue
			}
			v := xs[i+1]
			switch xs[i].Text {
			case "as":
				if v.Kind == NodeSymbol || v.Kind == NodeString {
					im.Alias = v.Text
				}
			case "bindings":
				if v.Kind != NodeList {
					continue
				}
				for j := 0; j+1 < len(v.List); j += 2 {
					k, val := v.List[j], v.List[j+1]
					if k.Kind == NodeKeyword && val.Kind == NodeString {
						im.Bindings = append(im.Bindings, ImportBinding{Key: k.Text, Value: val.Text})
					}
				}
			}
		}
		imports = append(imports, im)
	}
	sortDiags(e.diags)
	return imports, e.diags
}
