import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { MessageStatus, type PipelineConfig, PipelineConfigSchema, silentLogger } from "@factflow/protocols";
import * as v from "valibot";
import { afterEach, describe, expect, it } from "vitest";
import { FactflowMetrics } from "../src/metrics.js";
import { QueueJanitor, scopedDestinations } from "../src/queue-janitor.js";

// The janitor against the real in-process provider: every outcome it counts, and that it never throws.
const CONFIG: PipelineConfig = v.parse(PipelineConfigSchema, {
  name: "janitor",
  init: { route: "a" },
  routes: {
    a: { inbound: { queue: "j.a" }, adapters: [{ type: "noop" }], outbound: ["j.b", "j.out"] },
    b: { inbound: { queue: "j.b" }, adapters: [{ type: "noop" }] },
    c: { inbound: { queue: "j.c" }, adapters: [{ type: "noop" }] },
  },
});
const ID = "0190aaaa-bbbb-7ccc-8ddd-eeeeffff0000";

const providers: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const provider of providers.splice(0)) await provider.close();
});

async function embedded() {
  const provider = createEmbeddedProvider({ mode: "memory" });
  await provider.connect();
  providers.push(provider);
  return provider;
}

describe("queue janitor", () => {
  it("lists every inbound and outbound queue of the snapshot, scoped to the execution", async () => {
    const provider = await embedded();
    expect(scopedDestinations(provider, ID, CONFIG).sort()).toEqual(
      ["j.a", "j.b", "j.c", "j.out"].map((q) => `/queue/${ID}/${q}`),
    );
  });

  it("deletes drained queues, keeps dead letters and non-empty queues, and counts each outcome", async () => {
    const provider = await embedded();
    const metrics = new FactflowMetrics();
    const janitor = new QueueJanitor({ provider, logger: silentLogger, metrics, retryDelayMs: 10 });
    const scoped = (q: string) => `/queue/${ID}/${q}`;
    // j.a: used and drained. j.b: one dead letter. j.out: a message nobody consumed. j.c: never used.
    const drained = await provider.subscribe(scoped("j.a"), () => MessageStatus.ACKNOWLEDGED, {
      subscription: "a",
    });
    await provider.publish(scoped("j.a"), { body: 1 });
    const rejecting = await provider.subscribe(
      scoped("j.b"),
      () => ({ status: MessageStatus.REJECTED, reason: "test" }),
      { subscription: "b" },
    );
    await provider.publish(scoped("j.b"), { body: 2 });
    await provider.publish(scoped("j.out"), { body: 3 });
    const deadline = Date.now() + 5000;
    while ((await provider.admin.stats({ destination: scoped("j.b") })).dlqDepth < 1) {
      if (Date.now() > deadline) throw new Error("no dead letter in j.b");
      await new Promise((r) => setTimeout(r, 10));
    }
    await drained.unsubscribe();
    await rejecting.unsubscribe();

    const outcomes = await janitor.sweep(ID, CONFIG);
    expect(Object.fromEntries(outcomes)).toEqual({
      [scoped("j.a")]: "deleted",
      [scoped("j.b")]: "kept_dead_letters",
      [scoped("j.out")]: "refused",
      [scoped("j.c")]: "absent",
    });
    expect(
      (await provider.admin.browseDeadLetters({ destination: scoped("j.b") }, { offset: 0, limit: 5 })).total,
    ).toBe(1);
    expect(
      (await provider.admin.stats({ destination: scoped("j.out") })).depth,
      "a waiting message is never dropped",
    ).toBe(1);
    const text = await metrics.render();
    expect(text).toContain('factflow_queue_cleanup_total{outcome="deleted"} 1');
    expect(text).toContain('factflow_queue_cleanup_total{outcome="refused"} 1');
  });

  it("logs and counts a failing provider instead of throwing", async () => {
    const provider = await embedded();
    await provider.close();
    const janitor = new QueueJanitor({ provider, logger: silentLogger });
    const outcomes = await janitor.sweep(ID, CONFIG);
    expect([...outcomes.values()]).toEqual(["failed", "failed", "failed", "failed"]);
    expect(janitor.count("failed")).toBe(4);
  });
});
