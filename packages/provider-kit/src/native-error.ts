import { NETWORK_ERROR_CODES, type ProviderErrorReason } from "@factflow/protocols";

/** What a broker's or client's native error means for a caller: a reason and what to do about it. */
export interface NativeErrorMeaning {
  readonly reason: ProviderErrorReason;
  readonly hint: string;
}

/**
 * The Node socket error code of `error` when it says the network path to the broker failed
 * (`NETWORK_ERROR_CODES`), else undefined. With `text` (the error's message), a code that only
 * appears in the text counts too: some clients throw `new Error("connect ETIMEDOUT")` without a
 * `code`.
 */
export function networkErrorCode(error: unknown, text?: string): string | undefined {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  if (typeof code === "string" && NETWORK_ERROR_CODES.has(code)) return code;
  if (text === undefined) return undefined;
  const textCode = /\b(E[A-Z]+)\b/.exec(text)?.[1];
  return textCode !== undefined && NETWORK_ERROR_CODES.has(textCode) ? textCode : undefined;
}
