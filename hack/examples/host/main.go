// A host: create a session, run a command in it (confined), write a file
// itself and sync, change the session's cwd, remove it.
// Usage: go run ./hack/examples/host PROJECT-DIR  (socket: $WSFS_SOCKET;
// the wsfs binary: $WSFS_BIN, else wsfs in $PATH)
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/mounts/client"
)

func main() {
	if err := run(context.Background(), os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root string) (err error) {
	c := client.New(client.DefaultSocket()) // $WSFS_SOCKET, else /run/wsfs/wsfs.sock
	defer c.Close()
	s, err := c.Create(ctx, api.CreateRequest{ID: "task-1", Root: root})
	if err != nil {
		return err
	}
	defer func() {
		if rerr := c.Remove(ctx, s.ID, false); rerr != nil && err == nil {
			err = rerr
		}
		fmt.Println("removed", s.ID)
	}()
	// The host writes a file itself, then syncs before a tool may use it.
	if err := os.WriteFile(filepath.Join(root, "NOTES"), []byte("from the host\n"), 0o644); err != nil {
		return err
	}
	if err := c.Sync(ctx, s.ID); err != nil {
		return err
	}
	// Run a command in the session's working directory, in its jail
	// (wsfs exec --confine): paths there are the physical ones.
	out, err := c.Command(ctx, s.ID, []string{"ls"}, client.ExecOptions{}).Output()
	if err != nil {
		return err
	}
	fmt.Printf("ran ls in %s: %s\n", s.Root, strings.Join(strings.Fields(string(out)), " "))
	wd, err := c.Chdir(ctx, s.ID, "src")
	if err != nil {
		return err
	}
	fmt.Printf("cwd now %s (%s)\n", wd.Path, wd.Physical)
	return nil
}
