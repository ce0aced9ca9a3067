import { type HandlerResult, MessageStatus } from "@factflow/protocols";

/** What a handler did: returned something, or threw. */
export type Outcome = { readonly result: HandlerResult } | { readonly thrown: unknown };

/** What the broker does with a delivery once its handler is done. */
export type Verdict =
  | { readonly kind: "ack" }
  | { readonly kind: "retry"; readonly lastError: string; readonly incomplete: boolean }
  | {
      readonly kind: "dead";
      readonly reason: "rejected" | "exhausted" | "incomplete" | "topic-failure";
      readonly lastError: string;
    };

function describeThrown(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return `handler threw ${text}`.slice(0, 1_000);
}

/**
 * The settlement rules, in one place:
 * - ACKNOWLEDGED settles;
 * - REJECTED dead-letters at once;
 * - FAILED retries until attempt `maxAttempts` has failed, then dead-letters as `exhausted`; on a topic
 *   subscription it dead-letters after one attempt (`topic-failure`), so no other subscriber is touched;
 * - anything else (a throw, PENDING/DELIVERED/EXPIRED, a value that is no status, a timeout) is
 *   "incomplete": redelivered, but against the same budget, so it cannot circulate forever.
 */
export function decide(outcome: Outcome, attempt: number, maxAttempts: number, isTopic: boolean): Verdict {
  if ("thrown" in outcome) return incomplete(describeThrown(outcome.thrown), attempt, maxAttempts);
  const raw = outcome.result as unknown;
  let status: unknown = raw;
  let reason: string | undefined;
  if (typeof raw === "object" && raw !== null) {
    status = (raw as { status?: unknown }).status;
    const r = (raw as { reason?: unknown }).reason;
    if (typeof r === "string") reason = r.slice(0, 1_000);
  }
  switch (status) {
    case MessageStatus.ACKNOWLEDGED:
      return { kind: "ack" };
    case MessageStatus.REJECTED:
      return { kind: "dead", reason: "rejected", lastError: reason ?? "handler returned REJECTED" };
    case MessageStatus.FAILED: {
      const lastError = reason ?? "handler returned FAILED";
      if (isTopic) return { kind: "dead", reason: "topic-failure", lastError };
      if (attempt >= maxAttempts) return { kind: "dead", reason: "exhausted", lastError };
      return { kind: "retry", lastError, incomplete: false };
    }
    default:
      return incomplete(
        `handler returned ${JSON.stringify(status) ?? "undefined"}, not a settling status`,
        attempt,
        maxAttempts,
      );
  }
}

export function incomplete(detail: string, attempt: number, maxAttempts: number): Verdict {
  return attempt >= maxAttempts
    ? { kind: "dead", reason: "incomplete", lastError: detail }
    : { kind: "retry", lastError: detail, incomplete: true };
}
