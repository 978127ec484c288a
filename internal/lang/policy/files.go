package policy

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
)

// FileAccess is what a provider does with a file path an attribute names: the roots it is held
// to ([Policy.FilePathProblem]).
type FileAccess int

const (
	// FileWrite is a path the provider may write, create or delete, and the access of every
	// path attribute the model does not know better: held to [Policy.FileWriteRoots].
	FileWrite FileAccess = iota
	// FileRead is a path the provider only reads: held to [Policy.FileReadRoots] and
	// [Policy.FileWriteRoots] (what may be written may be read back).
	FileRead
	// NotAFile is an attribute whose name looks like a path but which names no file of Lava's
	// filesystem (a secret manager's path, a file in a remote repository): not held to any
	// root. Only [KnownFileAttributes] says so.
	NotAFile
)

// pathAttributeName is the name rule of docs/design/0022-file-access-from-schemas.md: an
// attribute named filename, file, path, source, dir or directory, or ending in _file,
// _filename, _path, _dir or _directory, each also in the plural ("source_dirs").
var pathAttributeName = regexp.MustCompile(`^(?:(?:file|filename|path|source|dir|directory)s?|[a-z0-9_]*_(?:file|filename|path|dir|directory)s?)$`)

// IsPathAttribute reports whether an attribute named name names a file path by the name rule
// (docs/design/0022-file-access-from-schemas.md): filename, file, path, source, dir,
// directory, or a name ending in _file, _filename, _path, _dir or _directory, each also in the
// plural. Names are matched as providers spell them (lower snake case).
func IsPathAttribute(name string) bool { return pathAttributeName.MatchString(name) }

// KnownFileAttributes is the explicit part of the file model, an addition to the name rule
// ([IsPathAttribute]) for the providers of this repository's catalog and tests: per provider
// ("namespace/type" on registry.opentofu.org or registry.terraform.io), per attribute
// ("TYPE.ATTR" of a resource, "data.TYPE.ATTR" of a data source, "provider.ATTR" of the
// provider's own configuration; a nested attribute or a block's attribute as
// "TYPE.BLOCK.ATTR"), what the provider does with the path: hashicorp/local reads
// local_file's and local_sensitive_file's source and its data sources' filename,
// hashicorp/archive reads source_file and source_dir (its source block's filename is a name
// inside the archive); akeyless's secret paths and github_repository_file's file (a path in a
// repository) name no file of Lava's. An attribute absent here that matches the name rule is
// [FileWrite]; one that does not match is no path, unless listed here.
var KnownFileAttributes = map[string]map[string]FileAccess{
	"hashicorp/local": {
		"local_file.source":                  FileRead,
		"local_sensitive_file.source":        FileRead,
		"data.local_file.filename":           FileRead,
		"data.local_sensitive_file.filename": FileRead,
	},
	"hashicorp/archive": {
		"archive_file.source_file":          FileRead,
		"archive_file.source_dir":           FileRead,
		"archive_file.source.filename":      NotAFile,
		"data.archive_file.source_file":     FileRead,
		"data.archive_file.source_dir":      FileRead,
		"data.archive_file.source.filename": NotAFile,
	},
	"hashicorp/akeyless":          akeylessPaths,
	"akeyless-community/akeyless": akeylessPaths,
	"integrations/github": {
		"github_repository_file.file": NotAFile,
	},
	// The helm provider downloads charts into its repository cache (a provider setting whose
	// name the name rule misses); its other paths (repository_config_path, plugins_path,
	// registry_config_path, kubernetes.config_path) the name rule covers.
	"hashicorp/helm": {
		"provider.repository_cache": FileWrite,
	},
}

// akeylessPaths are the Akeyless items' paths (secret names, not files) the catalog's akeyless
// architectures set, under the source they imply (hashicorp/akeyless) and the provider's own.
var akeylessPaths = map[string]FileAccess{
	"akeyless_static_secret.path": NotAFile,
	"akeyless_role.rules.path":    NotAFile,
}

// publicRegistries are the hosts whose providers [KnownFileAttributes] describes: a provider of
// the same namespace and type on another host is another provider, and gets the name rule only.
var publicRegistries = map[string]bool{"registry.opentofu.org": true, "registry.terraform.io": true}

// FileAttribute classifies one attribute of a provider's resource or data source. provider is
// the fully qualified address ("registry.opentofu.org/hashicorp/local"), key the type ("TYPE",
// "data.TYPE") and attr the attribute's path below it ("filename", "source.filename"). path
// reports whether the attribute names a file path; modelled whether [KnownFileAttributes]
// decided it (else the name rule did, and access is [FileWrite]).
func FileAttribute(provider, key, attr string) (access FileAccess, path, modelled bool) {
	host, rest, _ := strings.Cut(provider, "/")
	if publicRegistries[host] {
		if a, ok := KnownFileAttributes[rest][key+"."+attr]; ok {
			return a, a != NotAFile, true
		}
	}
	leaf := attr[strings.LastIndexByte(attr, '.')+1:]
	return FileWrite, IsPathAttribute(leaf), false
}

// FilePathProblem says why s is not a path a provider may touch with access ("" when it is): a
// literal, absolute, clean path ([PathFormProblem]) strictly under one of the roots access is
// held to (FileWriteRoots; for [FileRead] FileReadRoots too). It checks text only; the engines
// also resolve symbolic links and keep Lava's own directories out (internal/engine,
// FileAccess).
func (p Policy) FilePathProblem(s string, access FileAccess) string {
	if access == NotAFile {
		return ""
	}
	if why := PathFormProblem(s); why != "" {
		return why
	}
	roots := p.FileRoots(access)
	if len(roots) == 0 {
		return "is not allowed: the policy sets no " + rootNames(access) + ", so no provider may touch Lava's filesystem there"
	}
	if UnderAny(s, roots) {
		return ""
	}
	return "is outside the allowed directories (" + p.rootsText(access) + ")"
}

// PathFormProblem says why s is not a literal (no ${ or %{ at all, escaped or not), absolute,
// clean path ("" when it is). Paths are slash-separated (the engines run on Linux).
func PathFormProblem(s string) string {
	switch {
	case strings.Contains(s, "${") || strings.Contains(s, "%{"):
		return "is a template; want a literal absolute path (the policy cannot know where a template points)"
	case !path.IsAbs(s):
		return "is relative; want an absolute path (a relative path resolves against the engine's working directory)"
	case path.Clean(s) != s:
		return fmt.Sprintf("is not clean (want %q: no .., ., // or trailing /)", path.Clean(s))
	}
	return ""
}

// FileRoots are the directories a path with access must lie under: FileWriteRoots, and for
// [FileRead] FileReadRoots too (nil for [NotAFile]).
func (p Policy) FileRoots(access FileAccess) []string {
	switch access {
	case FileRead:
		return append(slices.Clone(p.FileReadRoots), p.FileWriteRoots...)
	case FileWrite:
		return p.FileWriteRoots
	}
	return nil
}

// rootNames names the lists of roots access is held to.
func rootNames(access FileAccess) string {
	if access == FileRead {
		return "fileReadRoots or fileWriteRoots"
	}
	return "fileWriteRoots"
}

// rootsText names the roots access is held to: "fileWriteRoots: /a, /b" (and the read roots for
// [FileRead]).
func (p Policy) rootsText(access FileAccess) string {
	s := "fileWriteRoots: " + listOrNone(p.FileWriteRoots)
	if access == FileRead {
		s = "fileReadRoots: " + listOrNone(p.FileReadRoots) + "; " + s
	}
	return s
}

// RootsText names the roots a path with access is held to, for messages ("fileWriteRoots: /a";
// for [FileRead] "fileReadRoots: /r; fileWriteRoots: /a"; "none" for an empty list).
func (p Policy) RootsText(access FileAccess) string { return p.rootsText(access) }

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// UnderAny reports whether the absolute clean path s lies strictly under one of roots (a root
// of "/" holds every other path).
func UnderAny(s string, roots []string) bool {
	for _, r := range roots {
		if (r == "/" && s != "/") || strings.HasPrefix(s, r+"/") {
			return true
		}
	}
	return false
}

// Overlaps reports whether the absolute clean paths a and b are the same or one holds the
// other.
func Overlaps(a, b string) bool {
	return a == b || a == "/" || b == "/" || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// Roots returns every fileWriteRoots and fileReadRoots entry of the document, each with where
// it is set ("cluster.fileWriteRoots", "namespaces.NS.fileReadRoots"), in a stable order; a
// [Config].NamespaceFileRoot comes first, as "namespaceFileRoot" (it holds every namespace's
// root).
func (c Config) Roots() [][2]string {
	var out [][2]string
	if c.NamespaceFileRoot != "" {
		out = append(out, [2]string{"namespaceFileRoot", c.NamespaceFileRoot})
	}
	out = append(out, c.Cluster.roots("cluster")...)
	for _, ns := range slices.Sorted(maps.Keys(c.Namespaces)) {
		out = append(out, c.Namespaces[ns].roots("namespaces."+ns)...)
	}
	return out
}

// roots returns the settings' fileWriteRoots and fileReadRoots entries, each with where it is
// set (where + ".fileWriteRoots").
func (s Settings) roots(where string) [][2]string {
	var out [][2]string
	for _, l := range []struct {
		name  string
		roots *[]string
	}{{"fileWriteRoots", s.FileWriteRoots}, {"fileReadRoots", s.FileReadRoots}} {
		if l.roots != nil {
			for _, r := range *l.roots {
				out = append(out, [2]string{where + "." + l.name, r})
			}
		}
	}
	return out
}

// UnmodelledNote is what a refused path of a type the file model does not describe adds to
// its message ("" when modelled): that Lava does not know which of the type's paths are only
// read, so it holds them to the write roots.
func UnmodelledNote(modelled bool, provider, key string) string {
	if modelled {
		return ""
	}
	return fmt.Sprintf(" (Lava does not know which paths of %s %s are only read, so each is held to the write roots: docs/design/0022-file-access-from-schemas.md)", provider, key)
}
