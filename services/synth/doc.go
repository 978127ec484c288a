// Command synth runs Lava's synth service (README.md in this directory).
package main
