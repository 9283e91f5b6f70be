// The client against a real `wsfs serve`, every answer checked against the
// OpenAPI document the daemon serves (so the tests fail when the daemon's
// answers drift from docs/openapi.yaml).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import { Client, WsfsError, type RawAnswer } from "../src/index.js";
import { Contract } from "./contract.js";
import { repo, skipReason, startDaemon, wsfsBinary, type Daemon } from "./daemon.js";

const skip = skipReason();

/** Makes dirs (names ending in "/") and files under base. */
function mkTree(base: string, ...entries: string[]): void {
  mkdirSync(base, { recursive: true });
  for (const e of entries) {
    const p = path.join(base, e);
    if (e.endsWith("/")) mkdirSync(p, { recursive: true });
    else writeFileSync(p, e);
  }
}

/** Awaits p and returns the WsfsError it rejects with. */
async function refusal(p: Promise<unknown>): Promise<WsfsError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof WsfsError, `not a WsfsError: ${String(e)}`);
    return e;
  }
  assert.fail("no refusal");
}

describe("wsfs client", { skip: skip || false }, () => {
  let d: Daemon;
  let c: Client;
  let contract: Contract;
  let root: string;

  before(async () => {
    d = await startDaemon();
    const answers: Array<[string, string, RawAnswer]> = [];
    c = new Client({ socket: d.socket, onAnswer: (m, p, a) => (contract ? contract.check(m, p, a) : answers.push([m, p, a])) });
    contract = new Contract(await c.openapi());
    for (const [m, p, a] of answers) contract.check(m, p, a);
    root = path.join(d.dir, "proj");
    mkTree(root, "src/", "src/main.go", "docs/", ".git/", ".git/hooks/");
  });

  after(async () => {
    await d?.stop();
  });

  it("serves the committed document", async () => {
    const doc = await c.openapi();
    assert.equal(doc.openapi, "3.1.0");
    const yaml = readFileSync(path.join(repo, "docs", "openapi.yaml"), "utf8");
    assert.match(yaml, /^openapi: 3\.1\.0$/m);
    assert.deepEqual(Object.keys(doc.paths as object).sort(), [...yaml.matchAll(/^ {2}(\/v1\/\S+):$/gm)].map((m) => m[1]).sort());
  });

  it("creates, lists, shows, steers and removes a session", async () => {
    assert.deepEqual(await c.health(), { status: "ok", sessions: 0, state_dir: d.stateDir, mount_base: d.mountBase });
    const s = await c.create({ id: "s1", root, cwd: "src" });
    assert.equal(s.id, "s1");
    assert.equal(s.root, root);
    assert.equal(s.mountpoint, path.join(d.mountBase, "s1"));
    assert.equal(s.mode, "workspace-write");
    assert.equal(s.symlinks, "contain");
    assert.equal(s.cwd, path.join(d.mountBase, "s1", "src"));
    assert.equal(s.state, "mounted");

    const list = await c.list();
    assert.deepEqual(list.map((x) => x.id), ["s1"]);
    assert.deepEqual(await c.get("s1"), list[0]);

    let wd = await c.cwd("s1");
    assert.deepEqual(wd, { session: "s1", path: s.cwd, physical: path.join(root, "src"), changed: false });
    wd = await c.chdir("s1", "../docs");
    assert.equal(wd.path, path.join(s.mountpoint, "docs"));
    assert.equal(wd.physical, path.join(root, "docs"));
    assert.equal(wd.changed, true);
    assert.equal(wd.events?.length, 1);

    const r = await c.resolve("s1", "../src/main.go");
    assert.equal(r.key, path.join(root, "src", "main.go"));
    assert.equal(r.mount_path, path.join(s.mountpoint, "src", "main.go"));
    assert.deepEqual(r.write, { allow: true, rule: "primary:read-write" });
    const hooks = await c.resolve("s1", "../.git/hooks/pre-commit");
    assert.deepEqual(hooks.write, { allow: false, errno: "EACCES", rule: "protected:git:.git/hooks" });

    const patched = await c.patchPolicy("s1", { protected: [".env"] });
    assert.deepEqual(patched.policy.protected?.slice(-1), [".env"]);
    const ro = await c.setPolicy("s1", { mode: "read-only" });
    assert.equal(ro.mode, "read-only");
    assert.equal((await c.resolve("s1", "x")).write.errno, "EROFS");

    writeFileSync(path.join(root, "docs", "host-made"), "host\n");
    assert.deepEqual(await c.sync("s1"), { session: "s1" });
    assert.equal(readFileSync(path.join(s.mountpoint, "docs", "host-made"), "utf8"), "host\n");
    assert.equal((await refusal(c.sync("nope"))).code, "not_found");

    const events = await c.events("s1");
    assert.equal(events.length, 1);
    assert.deepEqual(
      events.map((e) => [e.seq, e.type, e.from, e.to]),
      [[1, "cd", path.join(s.mountpoint, "src"), path.join(s.mountpoint, "docs")]],
    );

    // A sub-session inherits the parent's policy and may not widen it.
    const child = await c.create({ id: "s1-child", root, parent: "s1" });
    assert.equal(child.mode, "read-only");
    assert.equal(child.parent, "s1");
    assert.equal(child.cwd, path.join(d.mountBase, "s1-child", "docs"));
    const wider = await refusal(c.create({ id: "s1-wide", root, parent: "s1", policy: { mode: "full-access" } }));
    assert.equal(wider.code, "invalid");
    assert.match(wider.message, /wider than/);

    await c.remove("s1-child");
    await c.remove("s1");
    assert.deepEqual(await c.list(), []);
  });

  it("refuses with the documented codes", async () => {
    mkTree(path.join(d.dir, "r2"), "a/");
    await c.create({ id: "taken", root: path.join(d.dir, "r2") });
    const cases: Array<[string, () => Promise<unknown>, string, number]> = [
      ["bad id", () => c.create({ id: "a/b", root }), "invalid", 400],
      ["relative root", () => c.create({ id: "n", root: "proj" }), "invalid", 400],
      ["unknown session", () => c.get("nope"), "not_found", 404],
      ["remove unknown", () => c.remove("nope"), "not_found", 404],
      ["duplicate id", () => c.create({ id: "taken", root }), "exists", 409],
      ["cd to a file", () => c.chdir("taken", "../../etc/passwd"), "invalid", 400],
      ["blank resolve", () => c.resolve("taken", ""), "invalid", 400],
      ["bad policy", () => c.setPolicy("taken", { mode: "sideways" as "read-only" }), "invalid", 400],
    ];
    for (const [what, call, code, status] of cases) {
      const e = await refusal(call());
      assert.equal(e.code, code, `${what}: ${e.message}`);
      assert.equal(e.status, status, what);
      assert.ok(e.message.length > 0 && !e.message.includes("\n"), `${what}: one line: ${e.message}`);
    }
    let a = await c.raw("PATCH", "/v1/healthz");
    assert.equal(a.status, 405);
    assert.equal(JSON.parse(a.body).error.code, "method_not_allowed");
    a = await c.raw("POST", "/v1/sessions/taken/cwd", JSON.stringify({ cd: "x".repeat(1 << 20) }));
    assert.equal(a.status, 413);
    assert.equal(JSON.parse(a.body).error.code, "too_large");
    a = await c.raw("GET", "/v1/nothing");
    assert.equal(a.status, 404);

    const gone = await refusal(new Client({ socket: path.join(d.dir, "no.sock") }).health());
    assert.equal(gone.code, "unreachable");
    assert.equal(gone.status, 0);
    await c.remove("taken");
  });

  it("diffs, commits and discards a layered session", async () => {
    const lr = path.join(d.dir, "layered");
    mkTree(lr, "a", "b");
    const s = await c.create({ id: "lay", root: lr, layer: true });
    assert.equal(s.layer, path.join(d.stateDir, "layers", "lay"));
    writeFileSync(path.join(s.mountpoint, "a"), "changed\n");
    writeFileSync(path.join(s.mountpoint, "n"), "new\n");
    assert.equal(readFileSync(path.join(lr, "a"), "utf8"), "a");
    const diff = await c.diff("lay", [], true);
    assert.deepEqual(
      diff.changes.map((x) => [x.kind, x.path, x.fields ?? []]),
      [["modified", "a", ["content"]], ["added", "n", []]],
    );
    assert.match(diff.changes[0]?.diff ?? "", /\+changed/);
    assert.deepEqual(await c.commit("lay", ["a"]), { session: "lay", applied: ["a"] });
    assert.equal(readFileSync(path.join(lr, "a"), "utf8"), "changed\n");
    assert.deepEqual(await c.discard("lay"), { session: "lay", applied: ["n"] });
    assert.deepEqual((await c.diff("lay")).changes, []);

    // A checkpoint, a change after it, a rollback to it.
    writeFileSync(path.join(s.mountpoint, "b"), "at c1\n");
    const ck = await c.checkpoint("lay", "c1");
    assert.equal(ck.name, "c1");
    assert.deepEqual((await c.checkpoints("lay")).map((x) => x.name), ["c1"]);
    writeFileSync(path.join(s.mountpoint, "b"), "later\n");
    writeFileSync(path.join(s.mountpoint, "later"), "later\n");
    assert.deepEqual(await c.rollback("lay", "c1"), { session: "lay", checkpoint: "c1", applied: ["b", "later"] });
    assert.equal(readFileSync(path.join(s.mountpoint, "b"), "utf8"), "at c1\n");
    assert.equal((await refusal(c.checkpoint("lay", "c1"))).code, "exists");
    await c.deleteCheckpoint("lay", "c1");
    assert.equal((await refusal(c.rollback("lay", "c1"))).code, "not_found");
    assert.deepEqual(await c.checkpoints("lay"), []);
    await c.remove("lay");
  });

  it("runs the README's host example", () => {
    const example = readFileSync(path.join(repo, "clients", "typescript", "examples", "host.ts"), "utf8");
    const readme = readFileSync(path.join(repo, "README.md"), "utf8");
    assert.ok(readme.includes("```ts\n" + example + "```"), "README.md does not show examples/host.ts as it is");
    const out = execFileSync(process.execPath, [path.join(repo, "clients", "typescript", "dist", "examples", "host.js"), root], {
      env: { ...process.env, WSFS_SOCKET: d.socket, WSFS_BIN: wsfsBinary() },
      encoding: "utf8",
    });
    const mp = path.join(d.mountBase, "task-1");
    assert.equal(
      out,
      `ran ls in ${root}: NOTES docs src\ncwd now ${path.join(mp, "src")} (${path.join(root, "src")})\nremoved task-1\n`,
    );
  });

  it("answers only what the document describes", () => {
    assert.deepEqual(contract.problems, []);
    for (const code of ["invalid", "not_found", "exists", "method_not_allowed", "too_large"]) {
      assert.ok(contract.codes.has(code), `no answer with code ${code} was checked`);
    }
    rmSync(path.join(d.dir, "r2"), { recursive: true, force: true });
  });
});
