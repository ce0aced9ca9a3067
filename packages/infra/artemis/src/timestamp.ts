import { ProviderError } from "@factflow/protocols";

/**
 * The one timestamp format the Artemis provider puts on the wire (SUBSCRIBE and message headers):
 * strict ISO-8601 / RFC 3339 with a date, a time with seconds, optional fractional seconds and a
 * mandatory zone designator (`Z` or `±hh:mm`), e.g. `2026-11-30T03:41:07.512Z`.
 *
 * Why strict: the spec's rule for Artemis subscription headers is that a timestamp without a zone
 * (or in a locale format) is not rejected loudly; the broker side just does not match it, so the
 * failure is silent. A local-time string is also ambiguous across servers in different zones.
 */
const STRICT_ISO_8601 =
  /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,9})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/;

/** True when `value` is a strict ISO-8601 timestamp with a zone designator that names a real instant. */
export function isStrictIsoTimestamp(value: string): boolean {
  if (typeof value !== "string" || !STRICT_ISO_8601.test(value)) return false;
  // Date.parse rolls 2026-02-31 over into March: check the calendar day exists.
  const [year, month, day] = value.slice(0, 10).split("-").map(Number) as [number, number, number];
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day && Number.isFinite(Date.parse(value));
}

/**
 * Formats `at` (default now) as strict ISO-8601 in UTC (`…Z`). Throws for an invalid date instead of
 * letting `"Invalid Date"` reach the broker.
 */
export function isoTimestamp(at: Date = new Date()): string {
  const time = at.getTime();
  if (!Number.isFinite(time)) {
    throw new ProviderError(
      "artemis",
      "invalid-input",
      "cannot format an invalid Date as an ISO-8601 timestamp",
      {
        code: "invalid_argument",
      },
    );
  }
  return new Date(time).toISOString();
}

/**
 * Custom SUBSCRIBE header with the moment the consumer was created, for diagnostics (Artemis keeps
 * unknown SUBSCRIBE headers out of routing; they show in frame traces and broker debug logs, which is
 * where "which consumer got this, created when" is answered). Always {@link isoTimestamp}.
 */
export const SUBSCRIBED_AT_HEADER = "x-factflow-subscribed-at";

/** Throws when a header meant to carry a timestamp does not hold a strict ISO-8601 one. */
export function assertIsoTimestampHeader(name: string, value: string): void {
  if (!isStrictIsoTimestamp(value)) {
    throw new ProviderError(
      "artemis",
      "invalid-input",
      `header "${name}" must be a strict ISO-8601 timestamp with a zone (e.g. 2026-11-30T03:41:07.512Z), got "${value}"; format it with isoTimestamp()`,
      { code: "invalid_argument" },
    );
  }
}
