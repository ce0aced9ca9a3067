/** Every error Factflow raises on purpose has one of these codes. */
export type FactflowErrorCode =
  | "config_invalid"
  | "provider_error"
  | "provider_closed"
  | "provider_not_connected"
  | "invalid_destination"
  | "invalid_message"
  | "message_too_large"
  | "pipeline_error"
  | "adapter_failed"
  | "unknown_adapter"
  | "too_many_executions"
  | "execution_not_found"
  | "execution_not_running"
  | "config_not_found"
  | "not_found"
  | "invalid_argument"
  | "storage_key_invalid"
  | "storage_error"
  | "lineage_error"
  | "handler_timeout"
  | "delivery_lost"
  | "cancelled";

export interface FactflowErrorOptions {
  cause?: unknown;
  retryable?: boolean;
}

/**
 * The base of every deliberate Factflow error. `code` is stable and machine readable; `message`
 * says what failed and how to fix it, and never contains secrets.
 */
export class FactflowError extends Error {
  override readonly name: string = "FactflowError";
  readonly code: FactflowErrorCode;
  readonly retryable: boolean;

  constructor(code: FactflowErrorCode, message: string, options: FactflowErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? false;
  }
}

/** One problem found in a config, located by its path (and line, when it came from YAML). */
export interface ConfigIssue {
  /** Dotted path, e.g. `routes.parse.adapters[1].type`. */
  readonly path: string;
  readonly message: string;
  /** 1-based line in the YAML source, when known. */
  readonly line?: number;
}

/** A config (pipeline, settings, provider) is invalid. Carries every issue found, not just the first. */
export class ConfigError extends FactflowError {
  override readonly name: string = "ConfigError";
  readonly issues: readonly ConfigIssue[];

  constructor(subject: string, issues: readonly ConfigIssue[], options: FactflowErrorOptions = {}) {
    const lines = issues.map(
      (i) => `  - ${i.path}${i.line === undefined ? "" : ` (line ${i.line})`}: ${i.message}`,
    );
    super("config_invalid", `${subject} is invalid:\n${lines.join("\n")}`, options);
    this.issues = issues;
  }
}

/** Why a provider call failed, independent of the broker. */
export type ProviderErrorReason =
  | "connection"
  | "authentication"
  | "authorization"
  | "not-found"
  | "timeout"
  | "rejected"
  | "closed"
  | "invalid-input"
  | "unknown";

/** A broker call failed. Raw client errors never leak: they are classified and kept as `cause`. */
export class ProviderError extends FactflowError {
  override readonly name: string = "ProviderError";
  readonly provider: string;
  readonly reason: ProviderErrorReason;

  constructor(
    provider: string,
    reason: ProviderErrorReason,
    message: string,
    options: FactflowErrorOptions & { code?: FactflowErrorCode } = {},
  ) {
    super(
      options.code ?? (reason === "closed" ? "provider_closed" : "provider_error"),
      `[factflow/${provider}] ${message}`,
      {
        ...options,
        retryable: options.retryable ?? (reason === "connection" || reason === "timeout"),
      },
    );
    this.provider = provider;
    this.reason = reason;
  }
}

/** A pipeline could not run as asked (unknown adapter, too many executions, cancelled...). */
export class PipelineError extends FactflowError {
  override readonly name: string = "PipelineError";
}

/** True for any `FactflowError`, including ones from another copy of this package. */
export function isFactflowError(error: unknown): error is FactflowError {
  return (
    error instanceof FactflowError ||
    (error instanceof Error && typeof (error as { code?: unknown }).code === "string" && "retryable" in error)
  );
}

/**
 * The abort reason a provider gives a handler's signal when the handler ran past
 * `handlerTimeoutMs`. The delivery then counts as an incomplete attempt (retried with backoff, then
 * dead-lettered as `incomplete`), unlike an abort because the subscription stops, which hands the
 * message back without consuming an attempt. `isHandlerTimeout` tells them apart.
 */
export class HandlerTimeoutError extends FactflowError {
  override readonly name: string = "HandlerTimeoutError";
  constructor(readonly timeoutMs: number) {
    super("handler_timeout", `handler timed out after ${timeoutMs} ms`);
  }
}

/** True when an abort reason says the handler timed out (also for another copy of this package). */
export function isHandlerTimeout(reason: unknown): reason is HandlerTimeoutError {
  return (
    reason instanceof HandlerTimeoutError ||
    (reason instanceof Error && (reason as { code?: unknown }).code === "handler_timeout")
  );
}

/**
 * The abort reason a provider gives a handler's signal when the delivery went back to the broker
 * (its channel, link or connection closed): whatever the handler returns settles nothing, and the
 * broker hands the message out again. A consumer may let the handler finish anyway, so that it can
 * recognise that redelivery as a duplicate. `isDeliveryLost` recognises it.
 */
export class DeliveryLostError extends FactflowError {
  override readonly name: string = "DeliveryLostError";
  constructor(destination: string) {
    super(
      "delivery_lost",
      `the delivery from ${destination} went back to the broker (its channel closed); it will be handed out again`,
    );
  }
}

/** True when an abort reason says the delivery went back to the broker (also for another copy of this package). */
export function isDeliveryLost(reason: unknown): reason is DeliveryLostError {
  return (
    reason instanceof DeliveryLostError ||
    (reason instanceof Error && (reason as { code?: unknown }).code === "delivery_lost")
  );
}
