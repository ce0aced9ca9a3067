import type { QueueAdminProtocol, QueueProtocol } from "@factflow/protocols";

/**
 * Wraps an unconnected provider so it connects on first use: the first publish, subscribe or admin
 * call. A short command that only reads the database (listing executions, reading lineage) then
 * never opens the broker or takes the embedded provider's data-directory lock. Concurrent first
 * calls share one connect; a failed connect is retried by the next call.
 */
export function connectOnFirstUse(provider: QueueProtocol): QueueProtocol {
  let connecting: Promise<void> | undefined;
  const ready = (): Promise<void> => {
    connecting ??= provider.connect().catch((error: unknown) => {
      connecting = undefined;
      throw error;
    });
    return connecting;
  };
  // A Proxy, so admin operations added to the protocol later are covered without a change here.
  // Its target is a fresh object: providers freeze their admin, and a Proxy of a frozen object must
  // return the original functions.
  const inner = provider.admin;
  const admin = new Proxy({} as QueueAdminProtocol, {
    get(_target, property) {
      const value: unknown = Reflect.get(inner, property);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        await ready();
        return (value as (...a: unknown[]) => unknown).apply(inner, args);
      };
    },
    has: (_target, property) => Reflect.has(inner, property),
  });
  return {
    get name() {
      return provider.name;
    },
    get capabilities() {
      return provider.capabilities;
    },
    admin,
    connect: ready,
    // Never connected: nothing to close, and closing must not open a connection.
    close: () => (connecting === undefined ? Promise.resolve() : provider.close()),
    publish: async (destination, message) => {
      await ready();
      return provider.publish(destination, message);
    },
    subscribe: async (destination, handler, options) => {
      await ready();
      return provider.subscribe(destination, handler, options);
    },
    counters: () => provider.counters(),
    health: () => provider.health?.() ?? { problems: [] },
  };
}
