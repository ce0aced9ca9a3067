import { FactflowError } from "@factflow/protocols";
import { isUuid } from "./uuidv7.js";

/**
 * Rejects a malformed id before it reaches SQL, where it would surface as an opaque cast error.
 * @throws FactflowError `invalid_argument`
 */
export function assertUuid(value: unknown, what: string): asserts value is string {
  if (!isUuid(value)) {
    const shown = typeof value === "string" ? JSON.stringify(value.slice(0, 80)) : typeof value;
    throw new FactflowError(
      "invalid_argument",
      `[factflow/lineage] ${what} ${shown} is not a UUID. Pass the id as returned by the API (8-4-4-4-12 hex digits).`,
    );
  }
}

/** Validates an offset/limit pair and applies the defaults. */
export function pageOf(query: { offset?: number; limit?: number } | undefined, defaultLimit = 100) {
  const offset = query?.offset ?? 0;
  const limit = query?.limit ?? defaultLimit;
  if (!Number.isInteger(offset) || offset < 0) {
    throw new FactflowError(
      "invalid_argument",
      `[factflow/lineage] offset ${offset} must be an integer ≥ 0.`,
    );
  }
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) {
    throw new FactflowError(
      "invalid_argument",
      `[factflow/lineage] limit ${limit} must be an integer from 1 to 10000.`,
    );
  }
  return { offset, limit };
}
