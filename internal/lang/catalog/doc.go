// Package catalog is Lava's bundle of ready-made architectures: the 40 architectures of
// upstream's lava-architectures (docs/dialect.md section 3), written for Lava as .tlisp files and
// embedded in the binary, each with the deflava-interface of the same name that gates its
// bindings, and Lava's modules-demo.
//
// # Files
//
// Every architecture lives in architectures/NAME.tlisp and holds two forms: the
// deflava-architecture NAME that the evaluator (internal/lang/tlisp) turns into Terraform JSON, and
// the deflava-interface NAME that the gate (internal/lang/gate) validates binding bags against. The
// files are embedded with go:embed, so resolution never depends on the build machine's file
// system (upstream read them from the crate's source directory at run time). An architecture
// may ship module directories beside its file, architectures/NAME/DIR/main.tf.json, which
// [ModuleBundle] reads for the renderer (docs/dialect.md section 3.2).
//
// # Contract
//
//   - Inputs, defaults, resource types and name templates follow docs/dialect.md section 3 and README.md's table. An
//     input the table marks required is `:required #t` in the interface, with no `:default`
//     there, even when the architecture has a default (so an empty bag fails the gate).
//   - Every other input has a default in the architecture, so the minimal bag (the required
//     inputs only) evaluates.
//   - [Registry] gives each architecture's minimum resource count: what it renders with its
//     defaults and the minimal bag (0 for github-org-repos, whose repos default to empty).
//   - The three fixtures of docs/dialect.md section 3.1 (aws-vpc-network, dns-record-set,
//     cloudflare-tunnel) reproduce upstream's described output attribute by attribute, except
//     where the provider has no such argument (cloudflare-tunnel is written for the Cloudflare
//     provider v5); their renderings are pinned by golden files in testdata/.
//   - Every architecture pins the providers it uses (`:providers` with `:source` and
//     `:version`), and its render is valid against the schema of the pinned version
//     (testdata/providerschemas; README.md lists the versions and what the schemas cannot check).
//   - `:result` is kept as upstream wrote it (a consumer-side contract the evaluator ignores);
//     only aws-sg-ingress-rules and github-org-repos render `:outputs`.
package catalog
