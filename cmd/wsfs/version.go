package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// version is wsfs's version string, set at build time with
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/wsfs
//
// and "dev" otherwise.
var version = "dev"

func init() { registerCommand(newVersionCmd) }

// versionInfo is the output of `wsfs version --json`.
type versionInfo struct {
	Version string `json:"version"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

// newVersionCmd returns the `wsfs version` verb.
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the wsfs version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := versionInfo{Version: version, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
			if jsonOutput(cmd) {
				writeJSON(cmd.OutOrStdout(), v)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wsfs %s (%s %s/%s)\n", v.Version, v.Go, v.OS, v.Arch)
			return nil
		},
	}
}
