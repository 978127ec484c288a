// Command viggy runs Lava's viggy service, the autonomic loop (README.md in this directory).
package main
