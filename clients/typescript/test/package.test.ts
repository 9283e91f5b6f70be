// The package as a host installs it: `npm pack`, then `npm install` of the
// tarball in a scratch project (offline: the package has no dependencies at
// run time), a program there compiled with `tsc --strict` against the
// installed types, run against a real daemon: it creates a session, spawns
// `git status` confined in it, syncs, and removes the session.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import { repo, skipReason, startDaemon, wsfsBinary, type Daemon } from "./daemon.js";

const pkg = path.join(repo, "clients", "typescript");

const program = `import { Client, type ExecResult, type Session } from "@wsfs/client";

const [socket, root] = process.argv.slice(2);
if (!socket || !root) throw new Error("usage: main.js SOCKET ROOT");
const wsfs = new Client({ socket });
const s: Session = await wsfs.create({ id: "pkg-1", root });
try {
  const child = wsfs.spawn(s.id, ["git", "status", "--porcelain=v1"]);
  let out = "";
  child.stdout?.on("data", (b: Buffer) => (out += b.toString("utf8")));
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  await wsfs.sync(s.id);
  const pwd: ExecResult = await wsfs.exec(s.id, ["pwd", "-P"]);
  console.log(JSON.stringify({ code, out, pwd: pwd.stdout }));
} finally {
  await wsfs.remove(s.id);
}
`;

describe("the packed client", () => {
  let tmp: string;
  let scratch: string;
  let d: Daemon | undefined;

  before(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), "wsfs-pack-"));
    scratch = path.join(tmp, "scratch");
    mkdirSync(scratch);
  });

  after(async () => {
    await d?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it("packs, installs offline, type-checks with tsc --strict and runs", async (t) => {
    execFileSync("npm", ["pack", "--silent", "--pack-destination", tmp], { cwd: pkg, stdio: ["ignore", "ignore", "inherit"] });
    const tgz = readdirSync(tmp).filter((f) => /^wsfs-client-.*\.tgz$/.test(f));
    assert.equal(tgz.length, 1, `npm pack made ${JSON.stringify(readdirSync(tmp))}`);
    const listing = execFileSync("tar", ["-tzf", path.join(tmp, tgz[0]!)], { encoding: "utf8" });
    for (const f of ["package/dist/src/index.js", "package/dist/src/index.d.ts", "package/README.md", "package/LICENSE"]) {
      assert.ok(listing.split("\n").includes(f), `${f} not in the tarball:\n${listing}`);
    }

    writeFileSync(path.join(scratch, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }));
    execFileSync("npm", ["install", "--offline", "--no-audit", "--no-fund", "--silent", path.join(tmp, tgz[0]!)], {
      cwd: scratch,
      stdio: ["ignore", "ignore", "inherit"],
    });
    writeFileSync(path.join(scratch, "main.ts"), program);
    const tsc = path.join(pkg, "node_modules", "typescript", "bin", "tsc");
    execFileSync(
      process.execPath,
      [tsc, "--strict", "--target", "es2022", "--module", "nodenext", "--moduleResolution", "nodenext",
        "--types", "node", "--typeRoots", path.join(pkg, "node_modules", "@types"), "--outDir", "out", "main.ts"],
      { cwd: scratch, stdio: ["ignore", "inherit", "inherit"] },
    );

    const skip = skipReason();
    if (skip) {
      t.skip(skip);
      return;
    }
    d = await startDaemon();
    const root = path.join(d.dir, "repo");
    mkdirSync(root);
    execFileSync("git", ["init", "-q", root]);
    writeFileSync(path.join(root, "a.txt"), "a\n");
    const out = execFileSync(process.execPath, [path.join(scratch, "out", "main.js"), d.socket, root], {
      env: { ...process.env, WSFS_BIN: wsfsBinary() },
      encoding: "utf8",
    });
    assert.deepEqual(JSON.parse(out), { code: 0, out: "?? a.txt\n", pwd: root + "\n" });
  });
});
