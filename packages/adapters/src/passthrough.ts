import * as v from "valibot";
import { defineAdapter } from "./define-adapter.js";

/** `passthrough`: hands its input on unchanged. Useful as a route placeholder. */
export const passthroughAdapter = defineAdapter({
  type: "passthrough",
  description: "Passes the message on unchanged.",
  schema: v.strictObject({}),
  build: () => ({ type: "passthrough", process: (ctx) => ({ data: ctx.message }) }),
});
