// Fails when src/schema.ts is not what openapi-typescript generates from
// docs/openapi.yaml now (run `npm run generate` and commit the result).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const pkg = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const doc = path.join(pkg, "..", "..", "docs", "openapi.yaml");
const committed = path.join(pkg, "src", "schema.ts");
const tmp = mkdtempSync(path.join(os.tmpdir(), "wsfs-schema-"));
try {
  const fresh = path.join(tmp, "schema.ts");
  execFileSync(path.join(pkg, "node_modules", ".bin", "openapi-typescript"), [doc, "--output", fresh], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  if (readFileSync(fresh, "utf8") !== readFileSync(committed, "utf8")) {
    console.error(
      "check:generated: src/schema.ts is stale: docs/openapi.yaml changed since it was generated.\n" +
        "Run `npm run generate` in clients/typescript and commit src/schema.ts.",
    );
    process.exit(1);
  }
  console.log("check:generated: src/schema.ts matches docs/openapi.yaml");
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
