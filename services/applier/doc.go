// Command applier runs Lava's applier service (README.md in this directory).
package main
