import { ProviderError } from "@factflow/protocols";

/** Where a provider is in its life: created, connecting, usable, or closed for good. */
type LifecycleState = "new" | "connecting" | "open" | "closed";

/**
 * The lifecycle state machine behind `guardProvider`: connect runs once (concurrent callers share it,
 * a failure allows another try), close is idempotent and final, and every operation checks first
 * that the provider is open, with an error that says what to do.
 */
export interface Lifecycle {
  readonly state: LifecycleState;
  /** True between a successful connect and close. */
  readonly isOpen: boolean;
  /**
   * Runs `open` once. Callers arriving while it runs share its promise; when it fails the state goes
   * back to `new` and the error is rethrown, so connect can be tried again. After close it rejects with
   * a `closed` error. A close that arrives while `open` runs wins: the state stays `closed`.
   */
  connect(open: () => Promise<void>): Promise<void>;
  /**
   * Marks the provider closed at once (every later operation fails), waits for a connect in progress
   * to settle, then runs `shutdown` once. Every call returns the same promise.
   */
  close(shutdown: () => Promise<void>): Promise<void>;
  /** Throws unless open: `provider_closed` after close, `provider_not_connected` before connect. */
  assertOpen(operation: string): void;
  /** The error for `operation` after close (reason `closed`, code `provider_closed`). */
  closedError(operation: string): ProviderError;
  /** The error for `operation` before connect (reason `connection`, code `provider_not_connected`). */
  notConnectedError(operation: string): ProviderError;
}

/**
 * Creates the lifecycle guard of one provider instance. `factory` names the function that makes a new
 * provider, for the use-after-close message.
 */
export function createLifecycle(provider: string, factory = "the provider's factory"): Lifecycle {
  let state: LifecycleState = "new";
  let connecting: Promise<void> | undefined;
  let closing: Promise<void> | undefined;

  const closedError = (operation: string) =>
    new ProviderError(
      provider,
      "closed",
      `${operation} called after close(): create a new provider with ${factory} to continue`,
    );
  const notConnectedError = (operation: string) =>
    new ProviderError(
      provider,
      "connection",
      `${operation} called before connect(): await provider.connect() first`,
      { code: "provider_not_connected", retryable: false },
    );

  return {
    get state() {
      return state;
    },
    get isOpen() {
      return state === "open";
    },
    connect(open) {
      if (state === "closed") return Promise.reject(closedError("connect"));
      if (state === "open") return Promise.resolve();
      if (connecting === undefined) {
        state = "connecting";
        connecting = (async () => {
          try {
            await open();
          } catch (error) {
            connecting = undefined;
            if (state === "connecting") state = "new";
            throw error;
          }
          if (state === "connecting") state = "open";
        })();
      }
      return connecting;
    },
    close(shutdown) {
      closing ??= (async () => {
        const pending = connecting;
        state = "closed";
        if (pending !== undefined) await pending.catch(() => undefined);
        await shutdown();
      })();
      return closing;
    },
    assertOpen(operation) {
      if (state === "open") return;
      throw state === "closed" ? closedError(operation) : notConnectedError(operation);
    },
    closedError,
    notConnectedError,
  };
}
