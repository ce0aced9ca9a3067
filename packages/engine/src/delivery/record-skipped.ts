import { type Delivery, type HandlerResult, MessageStatus } from "@factflow/protocols";
import { nowIso } from "../ids.js";
import type { ExecutionRuntime } from "../runtime.js";

/**
 * Settles a message its route's condition skipped: the message row closes as `skipped` (no adapter
 * rows), the delivery counts as settled for good, and the provider acknowledges it.
 */
export function recordSkipped(runtime: ExecutionRuntime, delivery: Delivery): HandlerResult {
  const id = delivery.message.id;
  runtime.lineage.update(id, { status: "skipped", finishedAt: nowIso(), attempt: delivery.attempt });
  runtime.deliveries.settle(id, "completed", delivery.attempt);
  runtime.onSettled();
  return MessageStatus.ACKNOWLEDGED;
}
