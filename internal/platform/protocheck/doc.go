// Package protocheck reflects over Lava's lava.v1 protobuf descriptors: it lists the messages,
// enums and events (messages whose field 1 is the Envelope), and fills messages with every field
// set for round-trip tests. Its tests hold the protocol to its rules (envelope first, protojson
// round trip, every message in docs/events.md).
package protocheck
