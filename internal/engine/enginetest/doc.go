// Package enginetest holds what the engines' tests share about attacks on them through a real
// provider: [FileAttacks], the file-access attacks through example/testkit that the embedded
// and the tofu engine must both refuse (docs/design/0022-file-access-from-schemas.md), and
// [PlantProvider], an executable planted in a provider mirror.
package enginetest
