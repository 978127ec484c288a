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

// Resource is the "namespace/name" attribute of a LavaArchitecture.
func Resource(namespace, name string) slog.Attr {
	return slog.String(KeyResource, namespace+"/"+name)
}

// Generation is the metadata.generation attribute.
func Generation(g int64) slog.Attr { return slog.Int64(KeyGeneration, g) }

// Service is the emitting service's name.
func Service(name string) slog.Attr { return slog.String(KeyService, name) }
