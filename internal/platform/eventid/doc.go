// Package eventid computes the deterministic event_id of Lava's events (docs/events.md, "event_id") and
// the trigger strings that feed it.
//
// An event_id is the lowercase hex BLAKE3-256 of the resource uid, the generation, the event
// type and the trigger, in the length-prefixed encoding documented on [ID]. The same fact
// published twice gets the same id, so JetStream de-duplicates it through the Nats-Msg-Id
// header; a new trigger (a retry attempt, a forced reconcile, a policy change) gets a new id.
package eventid
