// Package natstest starts real NATS JetStream servers for tests and benchmarks: an in-process
// nats-server ([RunJetStream]) for most tests, and the nats-server binary ([RunBinary]) for tests
// that stop and restart the server.
package natstest
