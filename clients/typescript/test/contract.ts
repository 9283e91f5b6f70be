// Validates the daemon's answers against the OpenAPI document it serves
// (docs/openapi.yaml), with Ajv's JSON Schema 2020-12 validator (the dialect
// of OpenAPI 3.1 schemas): a field, status or code the document does not
// describe fails the test that received it.
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";

import type { RawAnswer } from "../src/index.js";

// ajv-formats is CommonJS; its default export is the function.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

interface Doc {
  paths: Record<string, Record<string, { responses?: Record<string, ResponseObj> }>>;
  components: { responses: Record<string, ResponseObj>; schemas: Record<string, unknown> };
}
interface ResponseObj {
  $ref?: string;
  content?: Record<string, { schema?: unknown }>;
}

export class Contract {
  readonly #doc: Doc;
  readonly #ajv: Ajv2020;
  readonly #validators = new Map<string, ValidateFunction>();
  /** Every answer checked so far: "METHOD /template STATUS". */
  readonly seen = new Set<string>();
  /** Every error code answered so far. */
  readonly codes = new Set<string>();
  /** What did not match the document. */
  readonly problems: string[] = [];

  constructor(doc: Record<string, unknown>) {
    this.#doc = doc as unknown as Doc;
    this.#ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(this.#ajv);
    this.#ajv.addSchema({ $id: "wsfs", components: this.#doc.components });
  }

  /** The document's path template matching urlPath, if any. */
  #template(urlPath: string): string | undefined {
    const p = urlPath.split("?")[0] ?? "";
    for (const t of Object.keys(this.#doc.paths)) {
      const re = new RegExp("^" + t.replace(/\{[^}]+\}/g, "[^/]+") + "$");
      if (re.test(p)) return t;
    }
    return undefined;
  }

  /** Checks one answer; a mismatch is recorded in problems. */
  check(method: string, urlPath: string, a: RawAnswer): void {
    const where = `${method} ${urlPath} → ${a.status}`;
    const t = this.#template(urlPath);
    const op = t ? this.#doc.paths[t]?.[method.toLowerCase()] : undefined;
    let resp: ResponseObj | undefined;
    if (!op) {
      // Not a documented operation: the body is still the error body.
      if (a.status !== 404 && a.status !== 405) this.problems.push(`${where}: not in the document`);
      resp = this.#doc.components.responses[a.status === 404 ? "NotFound" : "MethodNotAllowed"];
    } else {
      resp = op.responses?.[String(a.status)];
      if (!resp) {
        this.problems.push(`${where}: status not documented for ${method} ${t}`);
        return;
      }
    }
    if (resp?.$ref) resp = this.#doc.components.responses[resp.$ref.split("/").pop() ?? ""];
    this.seen.add(`${method} ${t ?? urlPath} ${a.status}`);
    if (!resp?.content) {
      if (a.body !== "") this.problems.push(`${where}: documented without a body, got ${a.body}`);
      return;
    }
    const type = a.contentType.split(";")[0]?.trim() ?? "";
    const media = resp.content[type];
    if (!media) {
      this.problems.push(`${where}: content type ${a.contentType} not documented (${Object.keys(resp.content)})`);
      return;
    }
    if (type !== "application/json") return;
    let value: unknown;
    try {
      value = JSON.parse(a.body);
    } catch {
      this.problems.push(`${where}: not JSON: ${a.body}`);
      return;
    }
    const key = `${method} ${t ?? a.status} ${a.status}`;
    let validate = this.#validators.get(key);
    if (!validate) {
      validate = this.#ajv.compile(absoluteRefs(media.schema));
      this.#validators.set(key, validate);
    }
    if (!validate(value)) {
      this.problems.push(`${where}: ${a.body.trim()} does not match the document: ${this.#ajv.errorsText(validate.errors)}`);
    }
    if (a.status >= 400) {
      const code = (value as { error?: { code?: string } }).error?.code;
      if (code) this.codes.add(code);
    }
  }
}

/** The schema with its "#/components/..." refs pointing into the document. */
function absoluteRefs(schema: unknown): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema ?? {}).replaceAll('"#/components/', '"wsfs#/components/')) as Record<string, unknown>;
}
