// Package enginetest holds what the engines' tests share about attacks on them through a real
// provider: [FileAttacks], the file-access attacks through example/testkit that the embedded
// and the tofu engine must both refuse (docs/design/0022-file-access-from-schemas.md),
// [PlantProvider], an executable planted in a provider mirror, and [DriftCases], out-of-band
// changes both engine families must report with the same findings (docs/dialect.md section 6).
package enginetest
