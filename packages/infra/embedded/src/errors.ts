import { type FactflowErrorCode, ProviderError } from "@factflow/protocols";

export const PROVIDER_NAME = "embedded";

/** Bad input from the caller: a clear message, never retryable. */
export function invalidInput(code: FactflowErrorCode, message: string): ProviderError {
  return new ProviderError(PROVIDER_NAME, "invalid-input", message, { code, retryable: false });
}

export function closedError(operation: string): ProviderError {
  return new ProviderError(
    PROVIDER_NAME,
    "closed",
    `${operation} called after close(): create a new provider with createEmbeddedProvider() to continue`,
  );
}

export function notConnectedError(operation: string): ProviderError {
  return new ProviderError(
    PROVIDER_NAME,
    "connection",
    `${operation} called before connect(): await provider.connect() first`,
    { code: "provider_not_connected", retryable: false },
  );
}
