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
 * retried and dead-lettered copies (header `x-last-error`), and with `settleAfter`: a promise the
 * provider awaits before it carries the status out with the broker (ack, retry or dead-letter copy).
 * The handler has returned in time, so neither its timeout nor a stop turns the wait into an
 * incomplete delivery; the engine passes its lineage commit here, so an acknowledged message's rows
 * are durable before the broker forgets the message. The promise must settle (a rejection counts as
 * settled).
 */
export type HandlerResult =
  | MessageStatus
  | { readonly status: MessageStatus; readonly reason?: string; readonly settleAfter?: PromiseLike<unknown> };

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

/** What the provider awaits before settling a delivery with the broker (see {@link HandlerResult}). */
export function settleAfterOf(result: HandlerResult): PromiseLike<unknown> | undefined {
  return typeof result === "string" ? undefined : result.settleAfter;
}
