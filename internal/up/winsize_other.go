//go:build !(linux || darwin)

package up

import "io"

// termWidth is the column count of the terminal w writes to (0: unknown on this system).
func termWidth(io.Writer) int { return 0 }
