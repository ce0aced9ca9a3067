import { createHash } from "node:crypto";
import {
  type DurabilityCounters,
  type MessageHandler,
  type OutboundMessage,
  PipelineError,
  type ProviderCapabilities,
  type PublishReceipt,
  parseDestination,
  type QueueAdminProtocol,
  type QueueProtocol,
  type SubscribeOptions,
  type Subscription,
} from "@factflow/protocols";
import { scopedDestination } from "./scoped-destination.js";

/**
 * A `QueueProtocol` view scoped to one execution. Point-to-point queues `/queue/<name>` become
 * `/queue/<executionId>/<name>` (`scopedDestination`) and subscription names get `:<8 hex chars of
 * a hash of the id>` (`subscriptionSuffix`), so two executions of the same config never share a
 * queue. Topics (`/topic/...`) are shared on purpose
 * (cross-execution signalling) and pass through unchanged. `connect`/`close` are not forwarded: the
 * wrapped provider is shared and owned by the application.
 */
export class ExecutionScopedQueue implements QueueProtocol {
  readonly name: string;
  readonly capabilities: ProviderCapabilities;
  readonly admin: QueueAdminProtocol;
  readonly #inner: QueueProtocol;
  readonly #suffix: string;
  /** Scoped destinations already worked out: every publish names one of a pipeline's few queues. */
  readonly #scoped = new Map<string, string>();

  constructor(
    inner: QueueProtocol,
    readonly executionId: string,
  ) {
    this.#inner = inner;
    this.name = inner.name;
    this.capabilities = inner.capabilities;
    this.admin = inner.admin;
    this.#suffix = subscriptionSuffix(executionId);
  }

  /** The broker destination a logical destination maps to for this execution. */
  scope(destination: string): string {
    const known = this.#scoped.get(destination);
    if (known !== undefined) return known;
    const scoped = this.#scopeOnce(destination);
    // Bounded, in case a pipeline publishes to ever new destinations (topics named per message).
    if (this.#scoped.size >= SCOPE_CACHE_SIZE) this.#scoped.clear();
    this.#scoped.set(destination, scoped);
    return scoped;
  }

  #scopeOnce(destination: string): string {
    const parsed = parseDestination(destination);
    if ("error" in parsed) throw new PipelineError("invalid_argument", `[factflow/engine] ${parsed.error}`);
    if (parsed.kind === "topic") return destination;
    // Idempotent, so a name that is already scoped is not scoped twice.
    const alreadyScoped = parsed.name.startsWith(`${this.executionId}/`);
    return alreadyScoped ? destination : scopedDestination(this.executionId, parsed.name);
  }

  /** The subscription name used on the broker for this execution. */
  scopeSubscription(name: string): string {
    return name.endsWith(`:${this.#suffix}`) ? name : `${name}:${this.#suffix}`;
  }

  async connect(): Promise<void> {}

  async close(): Promise<void> {}

  publish(destination: string, message: OutboundMessage): Promise<PublishReceipt> {
    // The engine's publisher sets the execution's id itself: no copy needed then.
    const scoped =
      message.executionId !== undefined ? message : { executionId: this.executionId, ...message };
    return this.#inner.publish(this.scope(destination), scoped);
  }

  subscribe(destination: string, handler: MessageHandler, options: SubscribeOptions): Promise<Subscription> {
    return this.#inner.subscribe(this.scope(destination), handler, {
      ...options,
      subscription: this.scopeSubscription(options.subscription),
    });
  }

  counters(): DurabilityCounters {
    return this.#inner.counters();
  }
}

const SCOPE_CACHE_SIZE = 1024;

/**
 * The suffix an execution adds to its subscription names: 8 hex chars of the SHA-256 of its whole
 * id. (The id's first 8 chars are UUIDv7 timestamp bits, shared by executions created within ~65 s.)
 */
export function subscriptionSuffix(executionId: string): string {
  return createHash("sha256").update(executionId).digest("hex").slice(0, 8);
}
