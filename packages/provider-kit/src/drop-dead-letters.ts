import {
  type HandlerResult,
  type MessageHandler,
  MessageStatus,
  settleAfterOf,
  unwrapHandlerResult,
} from "@factflow/protocols";
import type { ResolvedSubscribeOptions } from "./subscribe-options.js";

/**
 * For `deadLetter: false`: a delivery that would be dead-lettered (REJECTED, or its last attempt
 * failed or threw) is acknowledged instead, so it is dropped. A handler that times out on its last
 * attempt is settled by the provider before this sees it, and is still dead-lettered.
 */
export function dropDeadLetters(handler: MessageHandler, options: ResolvedSubscribeOptions): MessageHandler {
  return async (delivery, signal): Promise<HandlerResult> => {
    const last = delivery.attempt >= options.retry.maxAttempts;
    let result: HandlerResult;
    try {
      result = await handler(delivery, signal);
    } catch (error) {
      if (last && !signal.aborted) return MessageStatus.ACKNOWLEDGED;
      throw error;
    }
    if (signal.aborted) return result;
    const { status } = unwrapHandlerResult(result);
    if (status === MessageStatus.REJECTED || (last && status !== MessageStatus.ACKNOWLEDGED))
      return acknowledged(result);
    return result;
  };
}

/** ACKNOWLEDGED, still settled only after the result's `settleAfter`. */
function acknowledged(result: HandlerResult): HandlerResult {
  const settleAfter = settleAfterOf(result);
  return settleAfter === undefined
    ? MessageStatus.ACKNOWLEDGED
    : { status: MessageStatus.ACKNOWLEDGED, settleAfter };
}
