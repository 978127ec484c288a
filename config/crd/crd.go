// Package crd embeds the CustomResourceDefinitions controller-gen writes into bases/ (from the
// markers in api/v1alpha1), so the CLI (`lava crds`), the Helm chart checks and the envtest
// helper install exactly the committed YAML.
package crd

import (
	"bytes"
	"embed"
	"io/fs"
)

//go:embed bases/*.yaml
var bases embed.FS

// lavaArchitectureFile is the controller-gen output for the LavaArchitecture CRD.
const lavaArchitectureFile = "bases/lava.pleme.io_lavaarchitectures.yaml"

// documentSeparator is the YAML document separator controller-gen writes at the top of each
// file and `lava crds` writes between documents.
const documentSeparator = "---\n"

// All returns every CRD the operator owns (LavaArchitecture, LavaArchitectureDependency,
// RemediationPolicy), one YAML document each, in file-name order and without a leading "---"
// line. Each call returns fresh slices the caller may modify.
func All() [][]byte {
	entries, err := fs.ReadDir(bases, "bases")
	if err != nil {
		// The directory is embedded at build time; it cannot be missing.
		return nil
	}
	docs := make([][]byte, 0, len(entries))
	for _, e := range entries {
		b, err := fs.ReadFile(bases, "bases/"+e.Name())
		if err != nil {
			continue
		}
		docs = append(docs, trimSeparator(b))
	}
	return docs
}

// LavaArchitecture returns the LavaArchitecture CRD as one YAML document without a leading
// "---" line.
func LavaArchitecture() []byte {
	b, err := fs.ReadFile(bases, lavaArchitectureFile)
	if err != nil {
		return nil
	}
	return trimSeparator(b)
}

// Join writes docs as one multi-document YAML stream: the documents in order, each ending in a
// newline, separated by "---\n" lines; ready for `kubectl apply -f -`.
func Join(docs [][]byte) []byte {
	var buf bytes.Buffer
	for i, d := range docs {
		if i > 0 {
			buf.WriteString(documentSeparator)
		}
		buf.Write(d)
		if len(d) > 0 && d[len(d)-1] != '\n' {
			buf.WriteByte('\n')
		}
	}
	return buf.Bytes()
}

// trimSeparator drops a leading "---" line.
func trimSeparator(b []byte) []byte {
	return bytes.TrimPrefix(b, []byte(documentSeparator))
}
