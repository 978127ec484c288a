package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main with its arguments and outputs; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("providerschema", flag.ContinueOnError)
	fs.SetOutput(stderr)
	assembly := fs.String("assembly", "", "the package's .jsii (plain, gzipped or a file redirect)")
	pkgJSON := fs.String("package-json", "", "the package's package.json (name, version, cdktf.provider)")
	typesFile := fs.String("types-file", "", `the types to write, one a line: "resource TYPE", "data TYPE" or "provider"`)
	all := fs.Bool("all", false, "write every type of the assembly")
	out := fs.String("o", "", "output file (gzipped when it ends in .gz); standard output when absent")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *assembly == "" || *pkgJSON == "" || (*typesFile == "") == !*all {
		fmt.Fprintln(stderr, "providerschema: -assembly, -package-json and one of -types-file or -all are required")
		return 2
	}
	meta, err := readPackage(*pkgJSON)
	if err != nil {
		fmt.Fprintln(stderr, "providerschema:", err)
		return 1
	}
	asm, err := readAssembly(*assembly)
	if err != nil {
		fmt.Fprintln(stderr, "providerschema:", err)
		return 1
	}
	var want *selection
	if !*all {
		if want, err = readSelection(*typesFile); err != nil {
			fmt.Fprintln(stderr, "providerschema:", err)
			return 1
		}
	}
	doc, missing := derive(asm, meta, want)
	if err := write(*out, stdout, doc); err != nil {
		fmt.Fprintln(stderr, "providerschema:", err)
		return 1
	}
	for _, m := range missing {
		fmt.Fprintf(stderr, "providerschema: %s is not in %s %s\n", m, meta.Name, meta.Version)
	}
	if len(missing) > 0 {
		return 1
	}
	return 0
}

// packageMeta is what package.json says about the package and the provider it was built from.
type packageMeta struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	CDKTF   struct {
		Provider struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"provider"`
	} `json:"cdktf"`
}

func readPackage(path string) (packageMeta, error) {
	var m packageMeta
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	if m.Name == "" || m.Version == "" || m.CDKTF.Provider.Name == "" || m.CDKTF.Provider.Version == "" {
		return m, fmt.Errorf("%s: want name, version, cdktf.provider.name and cdktf.provider.version", path)
	}
	return m, nil
}

// readAssembly reads a jsii assembly: plain JSON, gzipped JSON, or a file redirect
// ({"schema": "jsii/file-redirect", "compression": "gzip", "filename": ".jsii.gz"}).
func readAssembly(path string) (*assemblyDoc, error) {
	b, err := readMaybeGzip(path)
	if err != nil {
		return nil, err
	}
	var redirect struct {
		Schema      string `json:"schema"`
		Compression string `json:"compression"`
		Filename    string `json:"filename"`
	}
	if err := json.Unmarshal(b, &redirect); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if redirect.Schema == "jsii/file-redirect" {
		if redirect.Compression != "" && redirect.Compression != "gzip" {
			return nil, fmt.Errorf("%s: unsupported compression %q", path, redirect.Compression)
		}
		target := filepath.Join(filepath.Dir(path), filepath.FromSlash(redirect.Filename))
		if b, err = readMaybeGzip(target); err != nil {
			return nil, err
		}
	}
	var a assemblyDoc
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(a.Types) == 0 {
		return nil, fmt.Errorf("%s: no types: not a jsii assembly", path)
	}
	return &a, nil
}

// readMaybeGzip reads path, gunzipping it when it starts with the gzip magic.
func readMaybeGzip(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer zr.Close()
	out, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// selection is the set of types a -types-file names.
type selection struct {
	provider  bool
	resources map[string]bool
	data      map[string]bool
	order     []string
}

func readSelection(path string) (*selection, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := &selection{resources: map[string]bool{}, data: map[string]bool{}}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kind, name, _ := strings.Cut(line, " ")
		name = strings.TrimSpace(name)
		switch {
		case kind == "provider" && name == "":
			s.provider = true
		case kind == "resource" && name != "":
			s.resources[name] = true
		case kind == "data" && name != "":
			s.data[name] = true
		default:
			return nil, fmt.Errorf("%s:%d: want \"resource TYPE\", \"data TYPE\" or \"provider\", got %q", path, n, line)
		}
		s.order = append(s.order, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// write encodes doc as indented JSON to path (gzipped for ".gz"), or to stdout when path is "".
func write(path string, stdout io.Writer, doc any) error {
	b, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "" {
		_, err := stdout.Write(b)
		return err
	}
	if strings.HasSuffix(path, ".gz") {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if _, err := zw.Write(b); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		b = buf.Bytes()
	}
	return errors.Join(os.WriteFile(path, b, 0o644))
}
