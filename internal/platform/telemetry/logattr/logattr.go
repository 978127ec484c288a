// Package logattr names the log attribute keys every Lava service uses, with small
// constructors, so that logs of different services can be joined on the same keys.
package logattr

import "log/slog"

// Attribute keys.
const (
	KeyEventID    = "event_id"
	KeySubject    = "subject"
	KeyStreamSeq  = "stream_seq"
	KeyResource   = "resource"
	KeyGeneration = "generation"
	KeyService    = "service"
	KeyPlanID     = "plan_id"
	KeyPhase      = "phase"
)

// EventID is the event_id attribute.
func EventID(id string) slog.Attr { return slog.String(KeyEventID, id) }

// Subject is the NATS subject attribute.
func Subject(s string) slog.Attr { return slog.String(KeySubject, s) }

// StreamSeq is the JetStream stream sequence attribute.
func StreamSeq(seq uint64) slog.Attr { return slog.Uint64(KeyStreamSeq, seq) }

// Resource is the "namespace/name" attribute of a LavaArchitecture.
func Resource(namespace, name string) slog.Attr {
	return slog.String(KeyResource, namespace+"/"+name)
}

// Generation is the metadata.generation attribute.
func Generation(g int64) slog.Attr { return slog.Int64(KeyGeneration, g) }

// Service is the emitting service's name.
func Service(name string) slog.Attr { return slog.String(KeyService, name) }

// PlanID is the plan id attribute.
func PlanID(id string) slog.Attr { return slog.String(KeyPlanID, id) }

// Phase is the phase attribute.
func Phase(p string) slog.Attr { return slog.String(KeyPhase, p) }
