// Command anomaly runs Lava's anomaly service (README.md in this directory).
package main
