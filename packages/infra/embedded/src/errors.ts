import { type FactflowErrorCode, ProviderError } from "@factflow/protocols";

export const PROVIDER_NAME = "embedded";

/** Bad input from the caller: a clear message, never retryable. */
export function invalidInput(code: FactflowErrorCode, message: string): ProviderError {
  return new ProviderError(PROVIDER_NAME, "invalid-input", message, { code, retryable: false });
}
