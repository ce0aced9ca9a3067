import type { JsonObject, JsonValue } from "@factflow/protocols";
import * as v from "valibot";
import { defineAdapter, FieldPathSchema, getPath, JsonSchema } from "./define-adapter.js";

/**
 * `json_transform`: reshapes an object message. Steps run in this order: `pick` (keep only these
 * fields, dotted paths allowed, stored under their last segment), `omit`, `rename`, `set`.
 */
export const jsonTransformAdapter = defineAdapter({
  type: "json_transform",
  description: "Picks, omits, renames and sets top-level fields of an object message.",
  schema: v.pipe(
    v.strictObject({
      pick: v.optional(v.array(FieldPathSchema)),
      omit: v.optional(v.array(v.string())),
      rename: v.optional(v.record(v.string(), v.string())),
      set: v.optional(v.record(v.string(), JsonSchema)),
    }),
    v.check(
      (c) => c.pick !== undefined || c.omit !== undefined || c.rename !== undefined || c.set !== undefined,
      "give at least one of pick, omit, rename, set",
    ),
  ),
  build: (config) => ({
    type: "json_transform",
    process(ctx) {
      const input = ctx.message;
      if (input === null || typeof input !== "object" || Array.isArray(input)) {
        return {
          data: null,
          error: `json_transform needs an object message, got ${Array.isArray(input) ? "an array" : typeof input}`,
          retryable: false,
        };
      }
      let out: JsonObject = { ...input };
      if (config.pick !== undefined) {
        out = {};
        for (const path of config.pick) {
          const value = getPath(input, path);
          if (value !== undefined) out[path.split(".").at(-1) as string] = value;
        }
      }
      for (const key of config.omit ?? []) delete out[key];
      for (const [from, to] of Object.entries(config.rename ?? {})) {
        if (from in out) {
          out[to] = out[from] as JsonValue;
          delete out[from];
        }
      }
      Object.assign(out, config.set ?? {});
      return { data: out };
    },
  }),
});
