// Package envflag fills command-line flags from LAVA_* environment variables, so every Lava
// service is configured the same way: a flag given on the command line wins, else the
// environment variable, else the flag's default.
//
// The variable for flag "nats-url" with prefix "LAVA" is LAVA_NATS_URL (upper case, dashes
// turned into underscores).
package envflag

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// VarName returns the environment variable that configures flag name: prefix + "_" + the
// upper-cased name with dashes as underscores ("LAVA", "nats-url" -> "LAVA_NATS_URL").
func VarName(prefix, name string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Apply sets every flag of fs that was not given on the command line from its environment
// variable, when that variable is set. Call it after fs.Parse. lookup is os.LookupEnv in
// production. An invalid value is an error naming the variable.
func Apply(fs *pflag.FlagSet, prefix string, lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		name := VarName(prefix, f.Name)
		v, ok := lookup(name)
		if !ok {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("envflag: %s=%q: %w", name, v, serr)
		}
	})
	return err
}
