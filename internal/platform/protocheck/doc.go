// Package protocheck holds the tests that hold Lava's lava.v1 protocol to its rules (envelope
// first, protojson round trip, every message in docs/events.md, the connect handlers). The
// package has no code of its own: the reflection over the descriptors that the tests use (list
// the messages, enums and events, the messages whose field 1 is the Envelope, and fill a
// message with every field set) is test code, in reflect_test.go.
package protocheck
