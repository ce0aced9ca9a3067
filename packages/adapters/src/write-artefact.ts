import type { JsonValue, PipelineContext } from "@factflow/protocols";
import * as v from "valibot";
import { defineAdapter, FieldPathSchema, getPath } from "./define-adapter.js";

const PLACEHOLDER = /\{([A-Za-z0-9_.]+)\}/g;

/**
 * Expands `{executionId}`, `{correlationId}`, `{messageId}`, `{route}`, `{attempt}` and
 * `{body.<path>}` in a key template.
 */
export function expandKey(template: string, ctx: PipelineContext): string {
  return template.replace(PLACEHOLDER, (_, name: string) => {
    const known: Record<string, string | number> = {
      executionId: ctx.executionId,
      correlationId: ctx.correlationId,
      messageId: ctx.messageId,
      route: ctx.route,
      attempt: ctx.attempt,
    };
    if (name in known) return String(known[name]);
    if (name.startsWith("body.")) {
      const value = getPath(ctx.message, name.slice(5));
      if (typeof value === "string" || typeof value === "number") return String(value);
    }
    throw new Error(`write_artefact: placeholder {${name}} has no string or number value`);
  });
}

/**
 * `write_artefact`: stores the message (or one field of it) in artefact storage under a templated
 * key, records the key in lineage, and passes the message on with the key added as `output_field`.
 */
export const writeArtefactAdapter = defineAdapter({
  type: "write_artefact",
  description: "Writes the message (or a field) to artefact storage under a templated key.",
  schema: v.strictObject({
    /** e.g. "runs/{executionId}/{correlationId}.json" */
    key: v.pipe(v.string(), v.minLength(1), v.maxLength(500)),
    /** Dotted path of the value to write; default the whole message. */
    field: v.optional(FieldPathSchema),
    /** Content type; strings default to text/plain, other values are written as JSON. */
    content_type: v.optional(v.string()),
    /** Field added to an object message with the written key. @default "artefact_key" */
    output_field: v.optional(v.string(), "artefact_key"),
  }),
  build: (config) => ({
    type: "write_artefact",
    async process(ctx) {
      let key: string;
      try {
        key = expandKey(config.key, ctx);
      } catch (error) {
        return { data: null, error: (error as Error).message, retryable: false };
      }
      const value = config.field === undefined ? ctx.message : getPath(ctx.message, config.field);
      if (value === undefined) {
        return { data: null, error: `write_artefact: field "${config.field}" is missing`, retryable: false };
      }
      const isText = typeof value === "string";
      await ctx.storage.put(key, isText ? value : JSON.stringify(value), {
        contentType: config.content_type ?? (isText ? "text/plain; charset=utf-8" : "application/json"),
        executionId: ctx.executionId,
        route: ctx.route,
        lineageId: ctx.lineageId,
      });
      const message = ctx.message;
      const data: JsonValue =
        message !== null && typeof message === "object" && !Array.isArray(message)
          ? { ...message, [config.output_field]: key }
          : message;
      return { data, outputKeys: [key] };
    },
  }),
});
