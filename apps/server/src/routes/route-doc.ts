import type * as v from "valibot";

/**
 * What the OpenAPI document says about one route (apps/server/src/openapi.ts generates it). `body`
 * and `query` are the valibot schemas the route validates with, so the document shows the shapes,
 * enums and bounds the server enforces.
 */
export interface RouteDoc {
  readonly method: "get" | "post" | "put";
  /** Path below the mount point, `{x}` for a path parameter. */
  readonly path: string;
  readonly summary: string;
  readonly tag: string;
  readonly body?: v.GenericSchema;
  /** The body may also be raw pipeline YAML (`application/yaml`). */
  readonly yaml?: boolean;
  readonly query?: v.GenericSchema;
  /** Success status. @default 200 */
  readonly ok?: number;
  /** Answers with Server-Sent Events. */
  readonly sse?: boolean;
  /** Answers with plain text. */
  readonly text?: boolean;
}
