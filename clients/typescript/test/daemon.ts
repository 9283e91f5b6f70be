// A real `wsfs serve` for the tests: built from this repository (or
// $WSFS_BIN), started on a fresh directory, stopped with SIGINT (the full stop: SIGTERM would keep the sessions for a next daemon), and every
// mount it left under that directory cleared by its exact path.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's top directory (this file is dist/test/daemon.js). */
export const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");

/** Why the daemon cannot run here, or "" when it can. */
export function skipReason(): string {
  if (process.getuid?.() !== 0) return "needs root (mount(2) for FUSE)";
  if (!existsSync("/dev/fuse")) return "needs /dev/fuse";
  return "";
}

let built: string | undefined;

/** The wsfs binary: $WSFS_BIN, else built once into a temp directory. */
export function wsfsBinary(): string {
  if (process.env.WSFS_BIN) return process.env.WSFS_BIN;
  if (built) return built;
  const dir = mkdtempSync(path.join(os.tmpdir(), "wsfs-ts-bin-"));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  const bin = path.join(dir, "wsfs");
  execFileSync("go", ["build", "-o", bin, "./cmd/wsfs"], { cwd: repo, stdio: ["ignore", "inherit", "inherit"] });
  built = bin;
  return bin;
}

/** A running daemon. */
export interface Daemon {
  dir: string;
  socket: string;
  stateDir: string;
  mountBase: string;
  log(): string;
  stop(): Promise<void>;
}

/** Starts `wsfs serve` and resolves once it logs that it serves. */
export async function startDaemon(): Promise<Daemon> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "wsfs-ts-"));
  const socket = path.join(dir, "wsfs.sock");
  const stateDir = path.join(dir, "state");
  const mountBase = path.join(dir, "mnt");
  const child: ChildProcess = spawn(
    wsfsBinary(),
    ["serve", "--socket", socket, "--state-dir", stateDir, "--mount-base", mountBase],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let log = "";
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`wsfs serve: not serving after 60s:\n${log}`)), 60_000);
    child.stderr!.on("data", (b: Buffer) => {
      log += b.toString();
      if (log.includes("msg=serving")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`wsfs serve exited (${code}) before serving:\n${log}`));
    });
  });
  return {
    dir,
    socket,
    stateDir,
    mountBase,
    log: () => log,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGINT");
        await exited;
      }
      clearMounts(dir);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Lazily unmounts every mount at or below dir, by its exact path. */
function clearMounts(dir: string): void {
  const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
  const mounts = readFileSync("/proc/self/mounts", "utf8")
    .split("\n")
    .map((l) => unescape(l.split(" ")[1] ?? ""))
    .filter((m) => m === dir || m.startsWith(dir + "/"))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) {
    try {
      execFileSync("umount", ["-l", m]);
    } catch {
      // reported by the test that left it
    }
  }
  if (mounts.length > 0) throw new Error(`mounts left under ${dir}: ${mounts.join(", ")}`);
}
