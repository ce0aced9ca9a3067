import * as v from "valibot";
import { defineAdapter } from "./define-adapter.js";

/** `log`: logs each message through the pipeline logger and passes it on. */
export const logAdapter = defineAdapter({
  type: "log",
  description: "Logs the message (level, text, and optionally the body) and passes it on unchanged.",
  schema: v.strictObject({
    /** @default "info" */
    level: v.optional(v.picklist(["debug", "info", "warn", "error"]), "info"),
    /** @default "message" */
    message: v.optional(v.string(), "message"),
    /** Include the body in the log fields (off by default: bodies may carry secrets). @default false */
    include_body: v.optional(v.boolean(), false),
  }),
  build: (config) => ({
    type: "log",
    process(ctx) {
      ctx.logger[config.level](config.message, {
        route: ctx.route,
        messageId: ctx.messageId,
        correlationId: ctx.correlationId,
        attempt: ctx.attempt,
        ...(config.include_body ? { body: ctx.message } : {}),
      });
      return { data: ctx.message };
    },
  }),
});
