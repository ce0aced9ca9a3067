import type {
  MessageHandler,
  OutboundMessage,
  PublishReceipt,
  QueueAdminProtocol,
  QueueProtocol,
  Subscription,
} from "@factflow/protocols";
import { dropDeadLetters } from "./drop-dead-letters.js";
import { hasGroupKey } from "./group-key.js";
import { groupedSubscription } from "./group-lanes.js";
import { createLifecycle, type Lifecycle } from "./lifecycle.js";
import { checkDestination, invalidInputError } from "./outbound.js";
import { type ResolvedSubscribeOptions, resolveSubscribeOptions } from "./subscribe-options.js";

/**
 * A provider as its author writes it, before {@link guardProvider}: the `QueueProtocol` (plus any
 * extras), except that `subscribe` receives options already validated and defaulted. Its `connect`
 * runs once at a time and never after `close`, its `close` runs once, and none of its `publish`,
 * `subscribe` or `admin` methods is called unless it is connected and not closed.
 */
export type UnguardedProvider<P extends QueueProtocol = QueueProtocol> = Omit<P, "subscribe"> & {
  subscribe(
    destination: string,
    handler: MessageHandler,
    options: ResolvedSubscribeOptions,
  ): Promise<Subscription>;
};

/** How {@link guardProvider} treats one provider. */
export interface GuardOptions<P extends QueueProtocol> {
  /**
   * The call that makes a new provider, named in the use-after-close error.
   * @default "the provider's factory"
   */
  readonly factory?: string;
  /**
   * The provider's own methods besides `QueueProtocol`'s that need a connected provider (they must
   * return promises). Guarded like `publish`: before `connect` and after `close` they reject with
   * `provider_not_connected` / `provider_closed`. Every other extra is passed through untouched.
   */
  readonly guarded?: readonly Exclude<keyof P & string, keyof QueueProtocol>[];
}

const PROTOCOL_MEMBERS: ReadonlySet<PropertyKey> = new Set([
  "name",
  "capabilities",
  "admin",
  "connect",
  "close",
  "publish",
  "subscribe",
  "counters",
]);

const ADMIN_METHODS = [
  "listDestinations",
  "stats",
  "browseDeadLetters",
  "redriveAll",
  "redriveOne",
  "discardOne",
  "deleteDestination",
] as const satisfies readonly (keyof QueueAdminProtocol)[];

/** Admin methods a provider may leave out: the guarded admin has them only when the provider does. */
const OPTIONAL_ADMIN_METHODS = ["purgeDestination"] as const satisfies readonly (keyof QueueAdminProtocol)[];

/** Every property name of `target` and its prototypes (not `Object.prototype`'s). */
function propertyNames(target: object): Set<PropertyKey> {
  const names = new Set<PropertyKey>();
  for (let o: object | null = target; o !== null && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const key of Reflect.ownKeys(o)) if (key !== "constructor") names.add(key);
  }
  return names;
}

/** Runs `work` if the lifecycle is open, else rejects with the error for `operation`. */
function whenOpen<T>(lifecycle: Lifecycle, operation: () => string, work: () => Promise<T>): Promise<T> {
  if (!lifecycle.isOpen) return Promise.reject(notOpen(lifecycle, operation()));
  try {
    return work();
  } catch (error) {
    return Promise.reject(error);
  }
}

function notOpen(lifecycle: Lifecycle, operation: string) {
  return lifecycle.state === "closed"
    ? lifecycle.closedError(operation)
    : lifecycle.notConnectedError(operation);
}

/**
 * Wraps any provider in the rules every provider obeys, the way kysely's runtime driver wraps every
 * dialect's driver:
 *
 * - `connect` runs the provider's connect once: concurrent callers share it, a failure allows
 *   another try, and after `close` it rejects with `provider_closed`.
 * - `close` is idempotent and final: it marks the provider closed at once, waits for a connect in
 *   progress, then runs the provider's close once. Every call returns the same promise.
 * - `publish`, `subscribe`, every `admin` method and the `guarded` extras reject before `connect`
 *   (`provider_not_connected`) and after `close` (`provider_closed`, naming `factory`) without
 *   reaching the provider.
 * - `subscribe` checks the destination (`invalid_destination`) and the handler, validates the options
 *   with `resolveSubscribeOptions` against the provider's capabilities (`invalid_argument`), and hands
 *   the provider the frozen, defaulted options. A subscribe that finishes after `close` started is
 *   undone and rejects with `provider_closed`.
 *
 * `name`, `capabilities`, `counters` and every other member are passed through (methods bound to
 * the provider), so a provider's extras keep working on the returned object.
 */
export function guardProvider<P extends QueueProtocol>(
  inner: UnguardedProvider<P>,
  options: GuardOptions<P> = {},
): P {
  const lifecycle = createLifecycle(inner.name, options.factory);
  const guardedExtras = new Set<PropertyKey>(options.guarded ?? []);
  const extras = inner as unknown as Record<PropertyKey, unknown>;
  const provider: Record<PropertyKey, unknown> = {};

  for (const key of propertyNames(inner)) {
    if (PROTOCOL_MEMBERS.has(key)) continue;
    const value = extras[key];
    if (typeof value === "function") {
      const method = value.bind(inner) as (...args: unknown[]) => unknown;
      provider[key] = guardedExtras.has(key)
        ? (...args: unknown[]) =>
            whenOpen(
              lifecycle,
              () => String(key),
              () => method(...args) as Promise<unknown>,
            )
        : method;
    } else {
      Object.defineProperty(provider, key, { enumerable: true, get: () => extras[key] });
    }
  }

  const admin = {} as Record<
    (typeof ADMIN_METHODS)[number] | (typeof OPTIONAL_ADMIN_METHODS)[number],
    unknown
  >;
  const offered = OPTIONAL_ADMIN_METHODS.filter((m) => typeof inner.admin[m] === "function");
  for (const method of [...ADMIN_METHODS, ...offered]) {
    admin[method] = (...args: unknown[]) =>
      whenOpen(
        lifecycle,
        () => `admin.${method}`,
        () => (inner.admin[method] as (...a: unknown[]) => Promise<unknown>).apply(inner.admin, args),
      );
  }

  const subscribe = async (
    destination: string,
    handler: MessageHandler,
    options: Parameters<QueueProtocol["subscribe"]>[2],
  ): Promise<Subscription> => {
    const operation = `subscribe to "${destination}"`;
    if (!lifecycle.isOpen) throw notOpen(lifecycle, operation);
    checkDestination(inner.name, destination);
    if (typeof handler !== "function") {
      throw invalidInputError(
        inner.name,
        "invalid_argument",
        `${operation} needs a handler function: (delivery, signal) => status`,
      );
    }
    const resolved = resolveSubscribeOptions(options, inner.capabilities, {
      provider: inner.name,
      destination,
    });
    // Message groups: the kit's lanes keep each group in order, across retries, on every provider.
    const plan = hasGroupKey(resolved)
      ? groupedSubscription(handler, resolved)
      : {
          handler: resolved.deadLetter ? handler : dropDeadLetters(handler, resolved),
          options: resolved,
        };
    let subscription: Subscription;
    try {
      subscription = await inner.subscribe(destination, plan.handler, plan.options);
    } catch (error) {
      if (lifecycle.state === "closed") throw lifecycle.closedError(operation);
      throw error;
    }
    if (lifecycle.state === "closed") {
      await subscription.unsubscribe().catch(() => undefined);
      throw lifecycle.closedError(operation);
    }
    return subscription;
  };

  Object.defineProperties(provider, {
    name: { enumerable: true, get: () => inner.name },
    capabilities: { enumerable: true, get: () => inner.capabilities },
    admin: { enumerable: true, value: Object.freeze(admin) },
  });
  Object.assign(provider, {
    connect: () => lifecycle.connect(() => inner.connect()),
    close: () => lifecycle.close(() => inner.close()),
    // The hot path: one state check, no closures.
    publish(destination: string, message: OutboundMessage): Promise<PublishReceipt> {
      if (!lifecycle.isOpen) return Promise.reject(notOpen(lifecycle, `publish to "${destination}"`));
      try {
        return inner.publish(destination, message);
      } catch (error) {
        return Promise.reject(error);
      }
    },
    subscribe,
    counters: () => inner.counters(),
  });
  return provider as unknown as P;
}
