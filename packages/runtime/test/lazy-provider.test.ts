import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { MessageStatus, type QueueProtocol } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { connectOnFirstUse } from "../src/lazy-provider.js";

/** A real in-memory provider whose connect calls are counted (and can be made to fail). */
function counted(failFirst = false) {
  const inner = createEmbeddedProvider({ mode: "memory" });
  const state = { connects: 0 };
  const provider: QueueProtocol = {
    get name() {
      return inner.name;
    },
    get capabilities() {
      return inner.capabilities;
    },
    get admin() {
      return inner.admin;
    },
    connect: async () => {
      state.connects += 1;
      if (failFirst && state.connects === 1) throw new Error("broker down");
      await inner.connect();
    },
    close: () => inner.close(),
    publish: (d, m) => inner.publish(d, m),
    subscribe: (d, h, o) => inner.subscribe(d, h, o),
    counters: () => inner.counters(),
  };
  return { provider, state };
}

describe("connectOnFirstUse", () => {
  it("connects once, at the first use, shared by concurrent callers", async () => {
    const { provider, state } = counted();
    const lazy = connectOnFirstUse(provider);
    expect(lazy.counters()).toBeDefined();
    expect(state.connects).toBe(0);
    const [list] = await Promise.all([
      lazy.admin.listDestinations(),
      lazy.publish("/queue/lazy.a", { body: 1 }),
    ]);
    expect(state.connects).toBe(1);
    expect(Array.isArray(list)).toBe(true);
    const got: unknown[] = [];
    await lazy.subscribe(
      "/queue/lazy.a",
      async (delivery) => {
        got.push(delivery.message.body);
        return MessageStatus.ACKNOWLEDGED;
      },
      { subscription: "lazy" },
    );
    const deadline = Date.now() + 60_000;
    while (got.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(got).toEqual([1]);
    expect(state.connects).toBe(1);
    await lazy.close();
  });

  it("closing a provider that was never used does not connect it", async () => {
    const { provider, state } = counted();
    await connectOnFirstUse(provider).close();
    expect(state.connects).toBe(0);
  });

  it("a failed connect is reported to the caller and retried by the next call", async () => {
    const { provider, state } = counted(true);
    const lazy = connectOnFirstUse(provider);
    await expect(lazy.admin.listDestinations()).rejects.toThrow("broker down");
    await expect(lazy.admin.listDestinations()).resolves.toBeDefined();
    expect(state.connects).toBe(2);
    await lazy.close();
  });
});
