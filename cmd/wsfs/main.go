// Command wsfs mounts agent sessions' project directories through FUSE so that
// every tool in a session sees one workspace identity. See README.md.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/wsfs/wsfs/confine"
)

// commandFactories are the verbs; each file registers its own in init() with
// registerCommand, so verbs live in separate files owned separately.
var commandFactories []func() *cobra.Command

func registerCommand(f func() *cobra.Command) { commandFactories = append(commandFactories, f) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "wsfs",
		Short:         "Mount session project directories with one consistent workspace identity",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().Bool("json", false, "print machine-readable JSON")
	for _, f := range commandFactories {
		root.AddCommand(f())
	}
	return root
}

func main() {
	confine.Init() // the jail's helper stage (exec --confine) returns only when not one
	os.Exit(run(os.Args[1:]))
}
