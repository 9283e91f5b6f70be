package main

import (
	"github.com/spf13/pflag"

	"github.com/wsfs/wsfs/transport"
)

// transportFlagHelp is the help of --fuse-transport on mount, serve and csi.
const transportFlagHelp = "how FUSE requests reach wsfs: auto (FUSE over io_uring when the kernel offers it, else /dev/fuse), io-uring (required: refused when the kernel's fuse enable_uring parameter is off), dev (/dev/fuse only) (default auto)"

// addTransportFlag registers --fuse-transport into p. Its default is empty,
// which is transport.Resolve's default (auto).
func addTransportFlag(fl *pflag.FlagSet, p *string) {
	fl.StringVar(p, "fuse-transport", "", transportFlagHelp)
}

// transportFlag checks a --fuse-transport value; a bad one is a usage
// error naming it and the accepted values.
func transportFlag(s string) (transport.Mode, error) {
	if s == "" {
		return "", nil
	}
	m, err := transport.ParseMode(s)
	if err != nil {
		return "", errUsage("--fuse-transport: %v", err)
	}
	return m, nil
}
