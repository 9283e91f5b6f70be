// A host: create a session, run a command in it, change its cwd, remove it.
// Usage: node dist/examples/host.js PROJECT-DIR  (socket: $WSFS_SOCKET)
import { execFileSync } from "node:child_process";
import { Client } from "@wsfs/client";

const wsfs = new Client(); // $WSFS_SOCKET, else /run/wsfs/wsfs.sock
const s = await wsfs.create({ id: "task-1", root: process.argv[2] ?? process.cwd() });
try {
  // Run a command in the session's working directory, inside its mount.
  let wd = await wsfs.cwd(s.id);
  const out = execFileSync("ls", [], { cwd: wd.path, encoding: "utf8" });
  console.log(`ran ls in ${wd.path}: ${out.split("\n").filter(Boolean).join(" ")}`);
  wd = await wsfs.chdir(s.id, "src");
  console.log(`cwd now ${wd.path} (${wd.physical})`);
} finally {
  await wsfs.remove(s.id);
  console.log(`removed ${s.id}`);
}
