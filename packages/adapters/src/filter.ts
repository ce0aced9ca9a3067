import * as v from "valibot";
import { defineAdapter, FieldPathSchema, getPath, JsonSchema } from "./define-adapter.js";

/**
 * `filter`: passes a message on only when `field` matches; otherwise ends the chain (`data: null`).
 * Conditions: `equals`, `not_equals`, `in`, `exists`; all given must hold.
 */
export const filterAdapter = defineAdapter({
  type: "filter",
  description: "Keeps messages whose field matches the condition; drops the others (ends the chain).",
  mayEndChain: true,
  schema: v.pipe(
    v.strictObject({
      field: FieldPathSchema,
      equals: v.optional(JsonSchema),
      not_equals: v.optional(JsonSchema),
      in: v.optional(v.array(JsonSchema)),
      exists: v.optional(v.boolean()),
    }),
    v.check(
      (c) =>
        c.equals !== undefined || c.not_equals !== undefined || c.in !== undefined || c.exists !== undefined,
      "give one of equals, not_equals, in, exists",
    ),
  ),
  build: (config) => ({
    type: "filter",
    process(ctx) {
      const value = getPath(ctx.message, config.field);
      const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
      const keep =
        (config.exists === undefined || (value !== undefined) === config.exists) &&
        (config.equals === undefined || same(value, config.equals)) &&
        (config.not_equals === undefined || !same(value, config.not_equals)) &&
        (config.in === undefined || config.in.some((candidate) => same(value, candidate)));
      return { data: keep ? ctx.message : null };
    },
  }),
});
