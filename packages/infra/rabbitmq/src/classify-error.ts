import { errorText, isFactflowError, ProviderError } from "@factflow/protocols";
import { type NativeErrorMeaning, networkErrorCode } from "@factflow/provider-kit";
import { redactSecrets } from "./config.js";

/** AMQP reply codes (connection.close / channel.close) and what they mean for a caller. */
const REPLY_CODES: Record<number, NativeErrorMeaning> = {
  311: { reason: "invalid-input", hint: "the message is larger than the broker accepts (content too large)" },
  312: { reason: "not-found", hint: "the message could not be routed to any queue" },
  313: { reason: "rejected", hint: "no consumer could take the message immediately" },
  320: {
    reason: "connection",
    hint: "the broker closed the connection (restart or operator action); it will be re-established",
  },
  402: { reason: "invalid-input", hint: "the client used an invalid virtual host path" },
  403: {
    reason: "authorization",
    hint: "the user lacks permission for this operation or the name is reserved (amq.*)",
  },
  404: {
    reason: "not-found",
    hint: "the queue or exchange does not exist; declare it first or check the name",
  },
  405: { reason: "rejected", hint: "the queue is exclusive to or locked by another connection" },
  406: {
    reason: "rejected",
    hint: "a precondition failed: the object exists with different arguments (delete and re-create it, or use the same options), or a delivery tag was unknown",
  },
  501: { reason: "connection", hint: "a malformed frame broke the connection" },
  502: { reason: "connection", hint: "the broker could not parse a frame" },
  503: { reason: "invalid-input", hint: "the broker rejected an invalid command" },
  504: { reason: "closed", hint: "the channel was used after it closed" },
  505: { reason: "connection", hint: "an unexpected frame broke the connection" },
  506: { reason: "connection", hint: "the broker ran out of a resource" },
  530: { reason: "authorization", hint: "the operation is not allowed (check vhost access and permissions)" },
  540: { reason: "unknown", hint: "the broker does not implement this operation" },
  541: { reason: "connection", hint: "the broker hit an internal error and closed the connection" },
};

function replyCodeOf(error: unknown, message: string): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "number") return code;
  // Some amqplib errors only carry the reply code in the text, e.g. "Handshake terminated by server: 403 (...)".
  const match = /(?:server|failed)[^:]*:\s*(\d{3}) \(/.exec(message) ?? /;\s*(\d{3}) \(/.exec(message);
  return match?.[1] === undefined ? undefined : Number(match[1]);
}

function classify(error: unknown, message: string): NativeErrorMeaning {
  // amqplib's own connect timeout is a bare `new Error("connect ETIMEDOUT")`, without a code.
  if (networkErrorCode(error, message) !== undefined) {
    return {
      reason: "connection",
      hint: "the broker is unreachable; check the URL, that RabbitMQ runs and the network",
    };
  }
  if (/ACCESS[-_]REFUSED - Login was refused|authentication mechanism/i.test(message)) {
    return {
      reason: "authentication",
      hint: "the broker refused the credentials; check the user and password in the URL",
    };
  }
  if (/Expected ConnectionOpenOk/.test(message)) {
    return {
      reason: "authorization",
      hint: "the broker refused to open the virtual host; check it exists and the user may use it",
    };
  }
  const reply = replyCodeOf(error, message);
  if (reply !== undefined && REPLY_CODES[reply] !== undefined) return REPLY_CODES[reply];
  if (/message nacked/i.test(message)) {
    return {
      reason: "rejected",
      hint: "the broker nacked the message (internal error or queue overflow); publish it again later",
    };
  }
  if (/heartbeat timeout/i.test(message)) {
    return {
      reason: "connection",
      hint: "the broker stopped answering heartbeats; the connection will be re-established",
    };
  }
  if (
    /socket closed|unexpected close|closed abruptly|connection closed|ECONNRESET|write after end/i.test(
      message,
    )
  ) {
    return { reason: "connection", hint: "the connection dropped; it will be re-established" };
  }
  if (/channel ended|channel closed/i.test(message)) {
    return {
      reason: "closed",
      hint: "the channel closed before the broker answered; retry once the provider has reconnected",
    };
  }
  if (error instanceof RangeError || /exceeds|too large/i.test(message)) {
    return { reason: "invalid-input", hint: "the message or its headers are too large to encode" };
  }
  if (/timed? ?out/i.test(message)) return { reason: "timeout", hint: "the broker did not answer in time" };
  return { reason: "unknown", hint: "unexpected error from amqplib" };
}

/**
 * Turns any error raised by amqplib (or the socket under it) into a `ProviderError` with a
 * `reason`, a message saying what failed and how to fix it, and the raw error as `cause`. A
 * `FactflowError` passes through unchanged. Pass `url` so its password never shows.
 */
export function classifyAmqpError(error: unknown, operation: string, url?: string): ProviderError {
  if (isFactflowError(error) && error instanceof ProviderError) return error;
  const raw = errorText(error);
  const { reason, hint } = classify(error, raw);
  let message = `${operation} failed: ${hint} (${raw})`;
  if (url !== undefined) message = redactSecrets(message, url);
  // A channel that closed under us is transient too: the provider reopens it.
  const retryable =
    reason === "connection" || reason === "timeout" || reason === "closed" || /message nacked/i.test(raw);
  return new ProviderError("rabbitmq", reason, message, {
    cause: error,
    retryable,
    code: "provider_error",
  });
}

/** The AMQP reply code of a channel/connection close error, when it has one (404, 406...). */
export function amqpReplyCode(error: unknown): number | undefined {
  return replyCodeOf(error, errorText(error));
}
