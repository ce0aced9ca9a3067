import type {
  DurabilityCounters,
  ProviderCapabilities,
  QueueAdminProtocol,
  QueueProtocol,
  Subscription,
} from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import {
  emptyDurabilityCounters,
  guardProvider,
  type ResolvedSubscribeOptions,
  type UnguardedProvider,
} from "../src/index.js";

interface ToyProvider extends QueueProtocol {
  readonly config: { readonly region: string };
  /** Guarded extra. */
  purge(destination: string): Promise<number>;
  /** Unguarded extra. */
  opened(): number;
}

const CAPS: ProviderCapabilities = Object.freeze({
  priorities: false,
  retryDelay: "exponential",
  delayGranularityMs: 1,
  fifo: true,
  messageGroups: false,
  durable: false,
  maxMessageBytes: 1_024,
});

/** A provider with no broker behind it: it records what reaches it. */
function toy(options: { failConnects?: number; slowSubscribe?: Promise<void> } = {}) {
  const calls: string[] = [];
  const received: ResolvedSubscribeOptions[] = [];
  const counters: DurabilityCounters = emptyDurabilityCounters();
  let opened = 0;
  let failures = options.failConnects ?? 0;
  const admin: QueueAdminProtocol = {
    listDestinations: async () => {
      calls.push("admin.listDestinations");
      return [];
    },
    stats: async (source) => ({
      destination: source.destination,
      depth: 0,
      consumers: 0,
      inFlight: 0,
      dlqDepth: 0,
    }),
    browseDeadLetters: async () => ({ total: 0, offset: 0, items: [] }),
    redriveAll: async () => ({ redriven: 0 }),
    redriveOne: async () => ({ redriven: false }),
    discardOne: async () => ({ discarded: false }),
    deleteDestination: async () => ({ deleted: false }),
  };
  const inner: UnguardedProvider<ToyProvider> = {
    name: "toy",
    capabilities: CAPS,
    admin,
    config: { region: "here" },
    async connect() {
      calls.push("connect");
      await new Promise((resolve) => setTimeout(resolve, 5));
      if (failures-- > 0) throw new Error("refused");
      opened += 1;
    },
    async close() {
      calls.push("close");
    },
    async publish() {
      calls.push("publish");
      counters.published += 1;
      return { id: "1" };
    },
    async subscribe(destination, _handler, resolved): Promise<Subscription> {
      calls.push("subscribe");
      received.push(resolved);
      await options.slowSubscribe;
      return {
        destination,
        name: resolved.subscription,
        unsubscribe: async () => {
          calls.push("unsubscribe");
        },
      };
    },
    counters: () => ({ ...counters }),
    async purge() {
      calls.push("purge");
      return 0;
    },
    opened: () => opened,
  };
  return { inner, calls, received };
}

async function rejection(work: () => Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await work();
  } catch (error) {
    return error as { code: string; message: string };
  }
  throw new Error("expected a rejection");
}

describe("guardProvider", () => {
  it("connects once for concurrent callers, retries after a failure, and closes once", async () => {
    const { inner, calls } = toy({ failConnects: 1 });
    const provider = guardProvider(inner, { factory: "createToyProvider()" });
    await expect(provider.connect()).rejects.toThrow("refused");
    await Promise.all([provider.connect(), provider.connect()]);
    await provider.connect();
    expect(provider.opened()).toBe(1);
    await Promise.all([provider.close(), provider.close()]);
    await provider.close();
    expect(calls.filter((c) => c === "connect")).toHaveLength(2);
    expect(calls.filter((c) => c === "close")).toHaveLength(1);
  });

  it("refuses use before connect and after close without reaching the provider", async () => {
    const { inner, calls } = toy();
    const provider = guardProvider(inner, { factory: "createToyProvider()", guarded: ["purge"] });
    const early = [
      await rejection(() => provider.publish("/queue/a", { body: 1 })),
      await rejection(() => provider.subscribe("/queue/a", () => "ACKNOWLEDGED", { subscription: "s" })),
      await rejection(() => provider.admin.stats({ destination: "/queue/a" })),
      await rejection(() => provider.purge("/queue/a")),
    ];
    for (const e of early) expect(e.code).toBe("provider_not_connected");
    expect(early[0]!.message).toBe(
      '[factflow/toy] publish to "/queue/a" called before connect(): await provider.connect() first',
    );
    await provider.connect();
    await provider.publish("/queue/a", { body: 1 });
    await provider.admin.listDestinations();
    await provider.purge("/queue/a");
    await provider.close();
    const late = [
      await rejection(() => provider.publish("/queue/a", { body: 1 })),
      await rejection(() => provider.subscribe("/queue/a", () => "ACKNOWLEDGED", { subscription: "s" })),
      await rejection(() =>
        provider.admin.browseDeadLetters({ destination: "/queue/a" }, { offset: 0, limit: 1 }),
      ),
      await rejection(() => provider.purge("/queue/a")),
      await rejection(() => provider.connect()),
    ];
    for (const e of late) expect(e.code).toBe("provider_closed");
    expect(late[0]!.message).toContain("create a new provider with createToyProvider()");
    expect(calls).toEqual(["connect", "publish", "admin.listDestinations", "purge", "close"]);
  });

  it("passes name, capabilities, counters and extras through", async () => {
    const { inner } = toy();
    const provider = guardProvider(inner);
    expect(provider.name).toBe("toy");
    expect(provider.capabilities).toBe(CAPS);
    expect(provider.config.region).toBe("here");
    expect(provider.opened()).toBe(0);
    await provider.connect();
    await provider.publish("/queue/a", { body: 1 });
    expect(provider.counters().published).toBe(1);
    await provider.close();
    expect(provider.counters().published, "counters stay readable after close").toBe(1);
  });

  it("hands subscribe validated, defaulted options, and refuses bad ones the kit's way", async () => {
    const { inner, received, calls } = toy();
    const provider = guardProvider(inner);
    await provider.connect();
    await provider.subscribe("/queue/a", () => "ACKNOWLEDGED", { subscription: "s", concurrency: 2 });
    expect(received[0]).toMatchObject({ subscription: "s", prefetch: 10, concurrency: 2, ordering: "none" });
    expect(Object.isFrozen(received[0])).toBe(true);
    const groups = await rejection(() =>
      provider.subscribe("/queue/a", () => "ACKNOWLEDGED", {
        subscription: "s",
        ordering: "fifo",
        groupBy: "k",
      }),
    );
    expect(groups).toMatchObject({ code: "invalid_argument", reason: "invalid-input" });
    expect(groups.message).toContain("capabilities.messageGroups is false");
    const destination = await rejection(() =>
      provider.subscribe("/queue/has space", () => "ACKNOWLEDGED", { subscription: "s" }),
    );
    expect(destination.code).toBe("invalid_destination");
    const handler = await rejection(() =>
      provider.subscribe("/queue/a", "nope" as never, { subscription: "s" }),
    );
    expect(handler.message).toContain("needs a handler function");
    expect(
      calls.filter((c) => c === "subscribe"),
      "refused subscribes never reach the provider",
    ).toHaveLength(1);
    await provider.close();
  });

  it("undoes a subscribe that finishes after close started", async () => {
    let finish: () => void = () => {};
    const slow = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const { inner, calls } = toy({ slowSubscribe: slow });
    const provider = guardProvider(inner);
    await provider.connect();
    const subscribing = rejection(() =>
      provider.subscribe("/queue/a", () => "ACKNOWLEDGED", { subscription: "s" }),
    );
    await new Promise((resolve) => setTimeout(resolve, 1));
    const closing = provider.close();
    finish();
    expect((await subscribing).code).toBe("provider_closed");
    await closing;
    expect(calls).toContain("unsubscribe");
  });
});
