import type { Destination, MessageEnvelope } from "./envelope.js";
import type { MessageStatus } from "./message-status.js";

/** One delivery of a message to one subscription. */
export interface Delivery {
  readonly message: MessageEnvelope;
  /** The destination the subscription consumes (for topics, the topic). */
  readonly destination: Destination;
  /** The subscription name this delivery belongs to. */
  readonly subscription: string;
  /** 1-based attempt number, read from `x-delivery-attempt`. */
  readonly attempt: number;
  /** True when the broker says this exact delivery was handed out before (connection loss etc.). */
  readonly redelivered: boolean;
}

/**
 * What a handler may return: a status, or a status with a short reason that the provider records on
 * retried and dead-lettered copies (header `x-last-error`).
 */
export type HandlerResult = MessageStatus | { readonly status: MessageStatus; readonly reason?: string };

/**
 * A subscription's handler. The delivery is settled when the returned promise resolves, according to
 * the status. A thrown error, an internal status or an abort (the `signal` fires when the subscription
 * or the provider closes, or the handler times out) means "incomplete": the message is redelivered.
 */
export type MessageHandler = (
  delivery: Delivery,
  signal: AbortSignal,
) => Promise<HandlerResult> | HandlerResult;

/** Normalises a `HandlerResult`. */
export function unwrapHandlerResult(result: HandlerResult): { status: MessageStatus; reason?: string } {
  if (typeof result === "string") return { status: result };
  return result.reason === undefined
    ? { status: result.status }
    : { status: result.status, reason: result.reason };
}
