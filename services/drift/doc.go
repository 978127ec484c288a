// Command drift runs Lava's drift service (README.md in this directory).
package main
