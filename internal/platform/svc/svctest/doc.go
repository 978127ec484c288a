// Package svctest checks the command-line contract every Lava service binary shares (internal/platform/svc):
// usage on --help, exit codes 0, 1 and 2, errors naming the flag or LAVA_* variable, and a
// start against a real JetStream server ([CheckContract]).
package svctest
