import type { JsonValue, StatefulAdapter } from "@factflow/protocols";
import * as v from "valibot";
import { defineAdapter } from "./define-adapter.js";

/**
 * `batch` (stateful, fan-in): collects messages and emits `{ items: [...], count }` when `size` are
 * held, when `timeout_ms` passes, or when the route drains. The engine keeps every held message
 * unsettled until its batch is emitted, so a crash loses none of them (they are redelivered).
 */
export const batchAdapter = defineAdapter({
  type: "batch",
  description:
    "Groups messages into batches of `size` (fan-in), emitting early on a timer or when the route drains.",
  schema: v.strictObject({
    /** @default 10 */
    size: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(10_000)), 10),
    /** @default 5000 */
    timeout_ms: v.optional(v.pipe(v.number(), v.integer(), v.minValue(10)), 5000),
  }),
  // A message waits in the batch until the batch fills, its timer fires or the route drains.
  holdsMessagesMs: (config) => config.timeout_ms,
  build: (config): StatefulAdapter => {
    // Keyed by message id: a held message that is redelivered (its handler was cancelled) replaces
    // its earlier copy instead of joining the batch twice.
    let items = new Map<string, JsonValue>();
    const emit = () => {
      const batch = [...items.values()];
      items = new Map();
      return { data: { items: batch, count: batch.length } };
    };
    return {
      type: "batch",
      stateful: true,
      capacity: config.size,
      flushIntervalMs: config.timeout_ms,
      process(ctx) {
        items.set(ctx.messageId, ctx.message);
        return items.size >= config.size ? emit() : { data: null };
      },
      flush: () => (items.size === 0 ? null : emit()),
      forget(messageId) {
        items.delete(messageId);
      },
    };
  },
});
