import * as v from "valibot";
import { defineAdapter } from "./define-adapter.js";

/** `delay`: waits `ms` then passes the message on; cancel-safe (stops waiting when aborted). */
export const delayAdapter = defineAdapter({
  type: "delay",
  description: "Waits a fixed time, then passes the message on. Stops at once when cancelled.",
  schema: v.strictObject({ ms: v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(3_600_000)) }),
  build: (config) => ({
    type: "delay",
    process: (ctx) =>
      new Promise((resolve, reject) => {
        if (ctx.signal.aborted) {
          reject(ctx.signal.reason);
          return;
        }
        const onAbort = () => {
          clearTimeout(timer);
          reject(ctx.signal.reason);
        };
        const timer = setTimeout(() => {
          ctx.signal.removeEventListener("abort", onAbort);
          resolve({ data: ctx.message });
        }, config.ms);
        ctx.signal.addEventListener("abort", onAbort, { once: true });
      }),
  }),
});
