import type { DeadLetterSource, QueueProtocol } from "@factflow/protocols";
import type { ProxyTarget } from "./fault-proxy.js";
import { type KnownProvider, PROVIDER_EXPECTATIONS, type ProviderExpectations } from "./known-providers.js";
import type { Availability } from "./probe-tcp.js";

/** A host and port the provider must connect through instead of its configured one (the fault proxy). */
export interface ConnectOverride {
  readonly host: string;
  readonly port: number;
}

/**
 * How the fault group breaks the provider.
 * - `tcp`: the suite starts a fault proxy in front of `target` and builds the provider with the proxy's
 *   address, then cuts every connection mid-stream. For networked brokers.
 * - `restart`: the suite calls `crash` (default: `close()`) on the provider mid-stream, with handlers
 *   running, then builds a new provider over the same durable state. For in-process providers.
 * - `none`: the group is reported as not run, with `reason`.
 */
export type FaultInjection =
  | { readonly kind: "tcp"; readonly target: ProxyTarget }
  | { readonly kind: "restart"; readonly crash?: (provider: QueueProtocol) => Promise<void> }
  | { readonly kind: "none"; readonly reason: string };

/** Durations and sizes the suite uses. */
export interface ConformanceTiming {
  /** Deadline for an expected delivery or state, in ms (a deadline for a hang: a loaded machine
   * delivers late, never wrongly). @default 30000 */
  readonly deliveryTimeoutMs: number;
  /** How long the suite watches for something that must not happen (a redelivery, a duplicate), in ms. @default 500 */
  readonly quietPeriodMs: number;
  /** `initialDelayMs` of the retry tests; raised to twice `capabilities.delayGranularityMs` when lower. @default 200 */
  readonly retryInitialDelayMs: number;
  /** `multiplier` of the retry tests. @default 2 */
  readonly retryMultiplier: number;
  /** `maxAttempts` of the retry tests. @default 4 */
  readonly retryMaxAttempts: number;
  /** A measured retry gap (or delayed delivery) must be at least this times the computed delay. @default 0.8 */
  readonly retryLowerFactor: number;
  /**
   * How long the suite waits for a retry or a delayed message, as a multiple of its computed delay
   * (plus the provider's slack), before it gives up. A deadline only: how late a retry comes is
   * printed, never asserted (speed goals live in benchmarks). @default 2
   */
  readonly retryUpperFactor: number;
  /** Messages in the fault group's stream. @default 200 */
  readonly faultMessages: number;
}

export const DEFAULT_TIMING: ConformanceTiming = Object.freeze({
  deliveryTimeoutMs: 30_000,
  quietPeriodMs: 500,
  retryInitialDelayMs: 200,
  retryMultiplier: 2,
  retryMaxAttempts: 4,
  retryLowerFactor: 0.8,
  retryUpperFactor: 2,
  faultMessages: 200,
});

interface CommonOptions {
  /**
   * Builds a fresh, unconnected provider. Called many times; the suite connects it, and closes it before
   * building the next, so at most one provider the suite built is connected at any moment. A
   * file-backed provider should reuse one data directory across calls (the restart fault group needs
   * that). With `override`, connect through that host and port instead of the configured ones.
   */
  createProvider(override?: ConnectOverride): QueueProtocol | Promise<QueueProtocol>;
  /** Result of probing the broker. When not ok every group is reported as not run (a failure under `FACTFLOW_REQUIRE_SERVICES=1`). */
  available: Availability;
  faults: FaultInjection;
  timing?: Partial<ConformanceTiming>;
  /** Tells two runs of one provider apart in test names and the summary (e.g. `"file mode"`). */
  label?: string;
  /** Called once at the end with every destination the run used, to delete them on a shared broker. */
  cleanup?: (destinations: readonly string[]) => Promise<void>;
  /**
   * Stores one more copy of the dead letter `messageId` of `source` in its dead-letter destination,
   * as the broker does when the confirmation of a dead-letter copy is lost in a connection cut (the
   * same message id and publish time). The `dead-letters` group then checks that the admin API counts,
   * lists, redrives and discards that dead letter once. Leave it out for a provider that stores a
   * dead letter in the same step as it settles the original, so never twice; that test is then
   * reported as not run.
   */
  storeDeadLetterAgain?: (source: DeadLetterSource, messageId: string) => Promise<void>;
}

/**
 * Options of `runConformanceSuite`. A first-party provider names itself with a {@link KnownProvider};
 * any other name must bring its own `expectations`, so no provider runs without its behaviour written down.
 */
export type ConformanceOptions = CommonOptions &
  (
    | { name: KnownProvider; expectations?: Partial<ProviderExpectations> }
    | { name: string; expectations: ProviderExpectations }
  );

/** Options with every default applied. */
export interface ResolvedOptions extends CommonOptions {
  readonly name: string;
  readonly expectations: ProviderExpectations;
  readonly timing: ConformanceTiming;
}

export function resolveOptions(options: ConformanceOptions): ResolvedOptions {
  const known = (PROVIDER_EXPECTATIONS as Readonly<Record<string, ProviderExpectations>>)[options.name];
  if (known === undefined && options.expectations === undefined) {
    throw new Error(
      `[factflow/infra-testkit] provider "${options.name}" is not one of ${Object.keys(PROVIDER_EXPECTATIONS).join(", ")}: pass \`expectations\` describing how its broker behaves`,
    );
  }
  const expectations = { ...known, ...options.expectations } as ProviderExpectations;
  return { ...options, expectations, timing: { ...DEFAULT_TIMING, ...options.timing } };
}
