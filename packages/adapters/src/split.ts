import type { JsonValue } from "@factflow/protocols";
import * as v from "valibot";
import { defineAdapter, FieldPathSchema, getPath } from "./define-adapter.js";

/**
 * `split`: fans an array out into one message per item (`emitMessages`), ending the chain for the
 * original message. With `as`, each item is wrapped as `{ [as]: item, index }` plus the `include`d
 * fields of the parent.
 */
export const splitAdapter = defineAdapter({
  type: "split",
  description: "Emits one message per element of an array field (fan-out).",
  mayEndChain: true,
  schema: v.strictObject({
    /** Dotted path of the array; "$" for a message that is itself an array. */
    field: FieldPathSchema,
    as: v.optional(v.pipe(v.string(), v.minLength(1))),
    include: v.optional(v.array(v.string()), []),
  }),
  build: (config) => ({
    type: "split",
    process(ctx) {
      const items = getPath(ctx.message, config.field);
      if (!Array.isArray(items)) {
        return { data: null, error: `split: field "${config.field}" is not an array`, retryable: false };
      }
      const parent =
        ctx.message !== null && typeof ctx.message === "object" && !Array.isArray(ctx.message)
          ? ctx.message
          : {};
      const emitMessages = items.map((item, index) => {
        if (config.as === undefined) return { body: item };
        const body: Record<string, JsonValue> = { [config.as]: item, index };
        for (const key of config.include) if (parent[key] !== undefined) body[key] = parent[key] as JsonValue;
        return { body };
      });
      return { data: null, emitMessages, metadata: { count: items.length } };
    },
  }),
});
