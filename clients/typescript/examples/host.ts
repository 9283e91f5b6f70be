// A host: create a session, run a command in it (confined), write a file
// itself and sync, change the session's cwd, remove it.
// Usage: node dist/examples/host.js PROJECT-DIR  (socket: $WSFS_SOCKET;
// the wsfs binary: $WSFS_BIN, else wsfs in $PATH)
import { writeFileSync } from "node:fs";
import path from "node:path";
import { Client } from "@wsfs/client";

const wsfs = new Client(); // $WSFS_SOCKET, else /run/wsfs/wsfs.sock
const s = await wsfs.create({ id: "task-1", root: process.argv[2] ?? process.cwd() });
try {
  // The host writes a file itself, then syncs before a tool may use it.
  writeFileSync(path.join(s.root, "NOTES"), "from the host\n");
  await wsfs.sync(s.id);
  // Run a command in the session's working directory, in its jail
  // (wsfs exec --confine): paths there are the physical ones.
  const r = await wsfs.exec(s.id, ["ls"]);
  if (r.code !== 0) throw new Error(`ls: exit ${r.code}: ${r.stderr}`);
  console.log(`ran ls in ${s.root}: ${r.stdout.split("\n").filter(Boolean).join(" ")}`);
  const wd = await wsfs.chdir(s.id, "src");
  console.log(`cwd now ${wd.path} (${wd.physical})`);
} finally {
  await wsfs.remove(s.id);
  console.log(`removed ${s.id}`);
}
