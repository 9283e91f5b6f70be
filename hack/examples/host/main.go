// A host: create a session, run a command in it, change its cwd, remove it.
// Usage: go run ./hack/examples/host PROJECT-DIR  (socket: $WSFS_SOCKET)
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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
	// Run a command in the session's working directory, inside its mount.
	wd, err := c.Cwd(ctx, s.ID)
	if err != nil {
		return err
	}
	cmd := exec.Command("ls")
	cmd.Dir = wd.Path
	out, err := cmd.Output()
	if err != nil {
		return err
	}
	fmt.Printf("ran ls in %s: %s\n", wd.Path, strings.Join(strings.Fields(string(out)), " "))
	if wd, err = c.Chdir(ctx, s.ID, "src"); err != nil {
		return err
	}
	fmt.Printf("cwd now %s (%s)\n", wd.Path, wd.Physical)
	return nil
}
