import * as v from "valibot";
import { defineAdapter, FieldPathSchema, getPath, JsonSchema } from "./define-adapter.js";

/**
 * `fail` (demos and tests): fails messages by a rule. `mode` transient → retryable error, permanent →
 * non-retryable, fatal → aborts the execution. Only messages matching `when` fail (default all);
 * transient failures stop once the delivery attempt exceeds `until_attempt`.
 */
export const failAdapter = defineAdapter({
  type: "fail",
  description: "Fails matching messages transiently, permanently or fatally (for demos and tests).",
  schema: v.strictObject({
    mode: v.picklist(["transient", "permanent", "fatal"]),
    when: v.optional(v.strictObject({ field: FieldPathSchema, equals: JsonSchema })),
    /** Transient: fail attempts 1..until_attempt, then pass. Default: fail every attempt. */
    until_attempt: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
    /** @default "failed on purpose" */
    message: v.optional(v.string(), "failed on purpose"),
  }),
  build: (config) => ({
    type: "fail",
    process(ctx) {
      const matches =
        config.when === undefined ||
        JSON.stringify(getPath(ctx.message, config.when.field)) === JSON.stringify(config.when.equals);
      const spent = config.until_attempt !== undefined && ctx.attempt > config.until_attempt;
      if (!matches || (config.mode === "transient" && spent)) return { data: ctx.message };
      return {
        data: null,
        error: `${config.message} (${config.mode}, attempt ${ctx.attempt})`,
        retryable: config.mode === "transient",
        ...(config.mode === "fatal" ? { metadata: { fatal: true } } : {}),
      };
    },
  }),
});
