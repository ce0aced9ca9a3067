import { errorText, isFactflowError, ProviderError, type ProviderErrorReason } from "@factflow/protocols";
import { type NativeErrorMeaning, networkErrorCode } from "@factflow/provider-kit";

/** Artemis error codes (the `AMQnnnnnn` prefix of an ERROR frame's `message`) and what they mean. */
const ARTEMIS_CODES: Record<string, NativeErrorMeaning> = {
  AMQ229031: {
    reason: "authentication",
    hint: "the broker refused the login; check login/passcode (or the user in the URL)",
  },
  AMQ229032: {
    reason: "authorization",
    hint: "the user lacks a permission on this address; grant it in broker.xml <security-settings>",
  },
  AMQ229213: {
    reason: "authorization",
    hint: "the user lacks a permission on this address; grant it in broker.xml <security-settings>",
  },
  AMQ229017: { reason: "not-found", hint: "the queue does not exist and auto-create is off for it" },
  AMQ229216: { reason: "invalid-input", hint: "the destination is not a valid Artemis queue name" },
  AMQ339016: {
    reason: "rejected",
    hint: "an acknowledgement named a message this connection no longer holds (the delivery was reissued)",
  },
  AMQ339018: {
    reason: "rejected",
    hint: "an acknowledgement named a delivery whose consumer is gone (the delivery was reissued)",
  },
  AMQ339025: {
    reason: "rejected",
    hint: "an acknowledgement named a delivery this connection does not hold (the delivery was reissued)",
  },
  AMQ229102: {
    reason: "rejected",
    hint: "the address is full; consume its backlog or raise max-size-bytes in broker.xml",
  },
};

/** Text patterns for ERROR frames that carry no code. */
const PATTERNS: readonly [RegExp, ProviderErrorReason, string][] = [
  [/Invalid selector/i, "invalid-input", "the broker could not parse a selector"],
  [/Unable to validate user|Security exception|AMQ119031/i, "authentication", "check login/passcode"],
  [/does not have permission|not authorized/i, "authorization", "grant the permission in broker.xml"],
  [/does not exist/i, "not-found", "the queue or address does not exist"],
];

/** The `AMQnnnnnn` code of an Artemis message, if any. */
export function artemisCode(text: string): string | undefined {
  return /\bAMQ\d{6}\b/.exec(text)?.[0];
}

interface FrameLike {
  readonly command: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
}

function isFrame(value: unknown): value is FrameLike {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as { command?: unknown }).command === "string" &&
    typeof (value as { headers?: unknown }).headers === "object"
  );
}

/** A Node socket error, directly or inside the `{ type: "Error", message: Error }` event the TCP wrapper emits. */
function socketErrorOf(value: unknown): (Error & { code?: string }) | undefined {
  if (value instanceof Error) return value as Error & { code?: string };
  if (typeof value === "object" && value !== null) {
    const inner = (value as { message?: unknown }).message;
    if (inner instanceof Error) return inner as Error & { code?: string };
  }
  return undefined;
}

/**
 * Turns anything the STOMP client or the socket threw (an ERROR frame, a socket error event, an
 * `Error`) into a `ProviderError` with a reason, a retryable flag and a message that says what to do.
 * `what` names the operation, e.g. `publish to "/queue/orders"`. Factflow errors pass through.
 */
export function classifyArtemisError(error: unknown, what: string): ProviderError {
  if (error instanceof ProviderError) return error;
  if (isFactflowError(error)) {
    return new ProviderError("artemis", "unknown", `${what}: ${error.message}`, { cause: error });
  }
  if (isFrame(error)) {
    const text = `${error.headers.message ?? ""} ${error.body ?? ""}`.trim();
    const code = artemisCode(text);
    const known = code === undefined ? undefined : ARTEMIS_CODES[code];
    if (known !== undefined) {
      return new ProviderError("artemis", known.reason, `${what}: broker said "${text}": ${known.hint}`, {
        cause: error,
      });
    }
    for (const [pattern, reason, hint] of PATTERNS) {
      if (pattern.test(text)) {
        return new ProviderError("artemis", reason, `${what}: broker said "${text}": ${hint}`, {
          cause: error,
        });
      }
    }
    return new ProviderError(
      "artemis",
      "unknown",
      `${what}: broker sent ERROR "${text || "(no message)"}"; see the broker log for details`,
      { cause: error },
    );
  }
  const networkCode = networkErrorCode(socketErrorOf(error));
  if (networkCode !== undefined) {
    const hint =
      networkCode === "ECONNREFUSED"
        ? "nothing listens there; start the broker (bash scripts/services/artemis.sh start) or fix the URL"
        : "the network path to the broker failed; the provider reconnects on its own";
    return new ProviderError("artemis", "connection", `${what}: ${networkCode}: ${hint}`, {
      cause: error,
    });
  }
  if (/timed? ?out/i.test(errorText(error))) {
    return new ProviderError("artemis", "timeout", `${what}: ${errorText(error)}`, { cause: error });
  }
  if (/no underlying STOMP connection|not connected|connection (closed|lost)/i.test(errorText(error))) {
    return new ProviderError(
      "artemis",
      "connection",
      `${what}: the STOMP connection is down; it is re-established automatically, retry shortly`,
      { cause: error },
    );
  }
  return new ProviderError("artemis", "unknown", `${what}: ${errorText(error)}`, { cause: error });
}
