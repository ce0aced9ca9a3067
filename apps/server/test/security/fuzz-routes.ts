import { OPERATIONS } from "../../src/openapi.js";
import { type RawResponse, send } from "./server-process.js";

/** One hostile request and what the server answered. */
export interface FuzzCase {
  readonly method: string;
  readonly path: string;
  readonly what: string;
  readonly status: number;
  readonly body: string;
}

const UNKNOWN_ID = "0190a0a0-0000-7000-8000-000000000000";

/** Path parameter values no id or name can be: unknown, NUL, bad encodings, huge, traversal. */
const PATH_VALUES = [
  UNKNOWN_ID,
  "not-a-uuid",
  "a%00b",
  "%ff%fe",
  "%ED%A0%80",
  "..%2F..%2Fetc%2Fpasswd",
  "x".repeat(4000),
  "%F0%9F%92%A9",
];

/** Query values: NUL, bad encodings, wrong types, out of range. */
const QUERY_VALUES = ["a%00b", "%ff", "-1", "1e309", "99999999999999999999999", "true", "x".repeat(4000), ""];

/** Bodies: bad JSON, wrong shapes, NUL, lone surrogates, deep nesting. */
function hostileBodies(properties: readonly string[]): [string, string][] {
  const deep = `${"[".repeat(5000)}${"]".repeat(5000)}`;
  const bodies: [string, string][] = [
    ["empty", ""],
    ["bad json", "{"],
    ["null", "null"],
    ["array", "[]"],
    ["string", '"x"'],
    ["number", "1e309"],
    ["deep", deep],
    ["nul key", '{"a\\u0000":1}'],
    ["lone surrogate", '{"x":"\\ud800"}'],
  ];
  const wrong = [
    "null",
    "-1",
    "1e309",
    '"a\\u0000b"',
    '"\\udc00"',
    "[]",
    "{}",
    deep,
    `"${"z".repeat(10_000)}"`,
    "true",
  ];
  for (const property of properties) {
    for (const value of wrong) bodies.push([`${property}=${value.slice(0, 20)}`, `{"${property}":${value}}`]);
  }
  return bodies;
}

function properties(body: unknown): string[] {
  const props = (body as { properties?: Record<string, unknown> } | undefined)?.properties;
  return props === undefined ? [] : Object.keys(props);
}

/**
 * Sends hostile variants of every documented route (path parameters, query parameters, bodies) and
 * returns every answer. Uses only unknown ids and invalid bodies, so a correct server changes nothing.
 */
export async function fuzzRoutes(base: string, headers: Record<string, string> = {}): Promise<FuzzCase[]> {
  const cases: FuzzCase[] = [];
  const record = (method: string, path: string, what: string, response: RawResponse) =>
    cases.push({ method, path, what, status: response.status, body: response.text.slice(0, 300) });
  for (const op of OPERATIONS) {
    const method = op.method.toUpperCase();
    const params = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1] as string);
    const fill = (value: string) => op.path.replace(/\{\w+\}/g, value);
    const paths = params.length === 0 ? [op.path] : PATH_VALUES.map(fill);
    const bodies = method === "POST" ? hostileBodies(properties(op.body)) : [["none", undefined] as const];
    for (const path of paths) {
      for (const [what, body] of bodies) {
        const response = await send(base, method, path, {
          headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
          ...(body === undefined ? {} : { body }),
        });
        record(method, path, `body ${what}`, response);
      }
    }
    const queryPath = fill(UNKNOWN_ID);
    for (const name of op.query ?? []) {
      for (const value of QUERY_VALUES) {
        const path = `${queryPath}?${name}=${value}`;
        if (method === "GET" && op.sse === true) continue;
        record(method, path, `query ${name}`, await send(base, method, path, { headers }));
      }
    }
  }
  return cases;
}
