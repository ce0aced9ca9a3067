import { toJsonSchema } from "@valibot/to-json-schema";
import type * as v from "valibot";
import { CONFIG_ROUTES } from "./routes/configs.js";
import { DEAD_LETTER_BULK_ROUTES } from "./routes/dead-letter-bulk.js";
import { EXECUTION_ROUTES } from "./routes/executions.js";
import { QUEUE_ROUTES } from "./routes/queues.js";
import type { RouteDoc } from "./routes/route-doc.js";
import { SEARCH_ROUTES } from "./routes/search.js";
import { SYSTEM_ROUTES } from "./routes/system.js";

/**
 * The OpenAPI 3.1 document of the HTTP API, generated from the route modules' `*_ROUTES` lists:
 * request bodies and query parameters are the valibot schemas the routes validate with, converted
 * by `@valibot/to-json-schema`. A test checks that every route the app registers is documented.
 */

type JsonSchema = Record<string, unknown>;

/** One documented operation, with its schemas already converted to JSON Schema. */
export interface Operation {
  readonly method: RouteDoc["method"];
  /** Full path, `{x}` for a path parameter. */
  readonly path: string;
  readonly summary: string;
  readonly tag: string;
  /** Names of the query parameters. */
  readonly query?: readonly string[];
  /** JSON Schema of the JSON request body. */
  readonly body?: JsonSchema;
  readonly ok?: number;
  readonly sse?: boolean;
  readonly text?: boolean;
}

/** Routes outside `/api/v1`, registered by `createApp` itself. */
const ROOT_ROUTES: readonly RouteDoc[] = [
  { method: "get", path: "/healthz", summary: "Liveness: the process answers", tag: "system" },
  { method: "get", path: "/readyz", summary: "Readiness: provider and database answer", tag: "system" },
  { method: "get", path: "/metrics", summary: "Prometheus metrics", tag: "system", text: true },
];

const API_ROUTES: readonly RouteDoc[] = [
  { method: "get", path: "/openapi.json", summary: "This document", tag: "system" },
  ...SYSTEM_ROUTES,
  ...CONFIG_ROUTES,
  ...EXECUTION_ROUTES,
  ...QUEUE_ROUTES,
  ...DEAD_LETTER_BULK_ROUTES,
  ...SEARCH_ROUTES,
];

/**
 * JSON Schema (draft 2020-12, OpenAPI 3.1's dialect) of what a client sends: the input side of
 * each schema, so a query parameter transformed to a number is documented as the string it arrives as.
 */
function jsonSchemaOf(schema: v.GenericSchema): JsonSchema {
  const { $schema: _dialect, ...rest } = toJsonSchema(schema, {
    target: "draft-2020-12",
    typeMode: "input",
    // Checks and transforms have no JSON Schema form; the server still enforces them.
    errorMode: "ignore",
  }) as JsonSchema;
  return rest;
}

function toOperation(doc: RouteDoc, prefix: string): Operation {
  const query =
    doc.query === undefined
      ? undefined
      : Object.keys((jsonSchemaOf(doc.query).properties ?? {}) as Record<string, unknown>);
  return {
    method: doc.method,
    path: `${prefix}${doc.path}`,
    summary: doc.summary,
    tag: doc.tag,
    ...(query === undefined ? {} : { query }),
    ...(doc.body === undefined ? {} : { body: jsonSchemaOf(doc.body) }),
    ...(doc.ok === undefined ? {} : { ok: doc.ok }),
    ...(doc.sse === true ? { sse: true } : {}),
    ...(doc.text === true ? { text: true } : {}),
  };
}

/** Every documented route of the app, in document order. */
export const OPERATIONS: readonly Operation[] = [
  ...ROOT_ROUTES.map((doc) => toOperation(doc, "")),
  ...API_ROUTES.map((doc) => toOperation(doc, "/api/v1")),
];

const DOCS = new Map<string, RouteDoc>([
  ...ROOT_ROUTES.map((doc) => [`${doc.method} ${doc.path}`, doc] as const),
  ...API_ROUTES.map((doc) => [`${doc.method} /api/v1${doc.path}`, doc] as const),
]);

const errorResponse = {
  description: "Error",
  content: {
    "application/json": {
      schema: {
        type: "object",
        properties: {
          error: {
            type: "object",
            properties: {
              code: { type: "string" },
              message: { type: "string" },
              issues: {
                type: "array",
                items: {
                  type: "object",
                  properties: { path: { type: "string" }, message: { type: "string" } },
                },
              },
            },
            required: ["code", "message"],
          },
        },
        required: ["error"],
      },
    },
  },
};

function parametersOf(op: Operation): JsonSchema[] {
  const parameters: JsonSchema[] = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => ({
    name: m[1],
    in: "path",
    required: true,
    schema: { type: "string" },
  }));
  const query = DOCS.get(`${op.method} ${op.path}`)?.query;
  if (query !== undefined) {
    const schema = jsonSchemaOf(query);
    const required = new Set((schema.required ?? []) as string[]);
    for (const [name, property] of Object.entries((schema.properties ?? {}) as Record<string, JsonSchema>))
      parameters.push({ name, in: "query", required: required.has(name), schema: property });
  }
  return parameters;
}

function operationObject(op: Operation): JsonSchema {
  const content = op.sse
    ? { "text/event-stream": { schema: { type: "string" } } }
    : op.text
      ? { "text/plain": { schema: { type: "string" } } }
      : { "application/json": { schema: { type: "object" } } };
  const operation: JsonSchema = {
    summary: op.summary,
    tags: [op.tag],
    parameters: parametersOf(op),
    responses: {
      [String(op.ok ?? 200)]: { description: "OK", content },
      "4XX": errorResponse,
      "5XX": errorResponse,
    },
  };
  if (op.body !== undefined) {
    const yaml = DOCS.get(`${op.method} ${op.path}`)?.yaml === true;
    operation.requestBody = {
      required: true,
      content: {
        "application/json": { schema: op.body },
        ...(yaml ? { "application/yaml": { schema: { type: "string", description: "Pipeline YAML" } } } : {}),
      },
    };
  }
  if (op.method !== "get") operation.security = [{ bearer: [] }, {}];
  return operation;
}

let cached: Record<string, unknown> | undefined;

/** Builds the OpenAPI document (once; it depends on nothing at run time). */
export function openApiDocument(): Record<string, unknown> {
  if (cached !== undefined) return cached;
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of OPERATIONS) {
    const entry = paths[op.path] ?? {};
    entry[op.method] = operationObject(op);
    paths[op.path] = entry;
  }
  cached = {
    openapi: "3.1.0",
    info: {
      title: "Factflow API",
      version: "0.1.0",
      description:
        "Every mutating route requires `Authorization: Bearer <FACTFLOW_API_TOKEN>` when a token is configured.",
    },
    components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
    paths,
  };
  return cached;
}
