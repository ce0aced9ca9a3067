/**
 * What a handler returns to settle a delivery. There is no manual ack/nack: the return value decides.
 *
 * - `ACKNOWLEDGED`: the work is done; the provider settles the delivery.
 * - `FAILED`: transient; the provider re-attempts it with backoff up to the retry budget, then
 *   dead-letters it.
 * - `REJECTED`: permanent; the provider dead-letters it at once, where it stays inspectable.
 * - `PENDING`, `DELIVERED`, `EXPIRED`: internal lifecycle states. A handler must never return them; a
 *   provider that receives one treats the handler as incomplete and redelivers the message.
 */
export const MessageStatus = {
  ACKNOWLEDGED: "ACKNOWLEDGED",
  FAILED: "FAILED",
  REJECTED: "REJECTED",
  PENDING: "PENDING",
  DELIVERED: "DELIVERED",
  EXPIRED: "EXPIRED",
} as const;

export type MessageStatus = (typeof MessageStatus)[keyof typeof MessageStatus];

/** The statuses that settle a delivery. Anything else means "handler incomplete". */
export type SettlingStatus =
  | typeof MessageStatus.ACKNOWLEDGED
  | typeof MessageStatus.FAILED
  | typeof MessageStatus.REJECTED;

/** True for the three statuses a handler may legitimately return. */
export function isSettlingStatus(status: unknown): status is SettlingStatus {
  return status === "ACKNOWLEDGED" || status === "FAILED" || status === "REJECTED";
}
