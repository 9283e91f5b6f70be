package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is wsfs's version string when stamped at build time with
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/wsfs
//
// and "" otherwise; buildVersion then reads the build information.
var version = ""

// buildVersion returns the version wsfs reports: the stamped version, else
// the module version the go command recorded (a tag such as v0.2.0 when
// built from a tagged checkout or with `go install ...@v0.2.0`, a
// pseudo-version otherwise, "+dirty" with uncommitted changes), else the VCS
// revision ("dev+1234abcd5678", "-dirty" with changes), else "dev".
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return versionOf(bi)
}

// versionOf is buildVersion's rule on given build information.
func versionOf(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return "dev+" + rev + dirty
}

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
			v := versionInfo{Version: buildVersion(), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
			if jsonOutput(cmd) {
				writeJSON(cmd.OutOrStdout(), v)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wsfs %s (%s %s/%s)\n", v.Version, v.Go, v.OS, v.Arch)
			return nil
		},
	}
}
