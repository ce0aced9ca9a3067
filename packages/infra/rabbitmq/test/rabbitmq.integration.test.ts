import { createFaultProxy } from "@factflow/infra-testkit";
import { type Delivery, type HandlerResult, ProviderError, silentLogger } from "@factflow/protocols";
import amqp from "amqplib";
import { afterAll, describe, expect, it } from "vitest";
import { ConnectionManager } from "../src/connection-manager.js";
import { encodeMessage } from "../src/envelope-codec.js";
import { createRabbitMqProvider, parseRabbitMqConfig, type RabbitMqProvider } from "../src/index.js";
import { Publisher } from "../src/publisher.js";
import {
  brokerUnavailable,
  deleteTopology,
  RABBITMQ_URL,
  uniquePrefix,
  urlVia,
  waitUntil,
} from "./helpers.js";

const skip = await brokerUnavailable();
const prefix = uniquePrefix("it");
const created: RabbitMqProvider[] = [];
const extraQueues: string[] = [];

function provider(overrides: Parameters<typeof createRabbitMqProvider>[0] = {}): RabbitMqProvider {
  const p = createRabbitMqProvider({ url: RABBITMQ_URL, heartbeatSeconds: 2, ...overrides });
  created.push(p);
  return p;
}

/** Collects deliveries; `respond` decides each outcome. */
function recorder(
  respond: (d: Delivery, signal: AbortSignal) => HandlerResult | Promise<HandlerResult> = () =>
    "ACKNOWLEDGED",
) {
  const seen: { delivery: Delivery; at: number }[] = [];
  return {
    seen,
    ids: () => seen.map((s) => s.delivery.message.id),
    handler: async (d: Delivery, signal: AbortSignal) => {
      seen.push({ delivery: d, at: Date.now() });
      return respond(d, signal);
    },
  };
}

async function rejection(work: () => Promise<unknown>): Promise<ProviderError> {
  try {
    await work();
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderError);
    return error as ProviderError;
  }
  throw new Error("expected a rejection");
}

afterAll(async () => {
  if (skip) return;
  for (const p of created) await p.close();
  await deleteTopology({
    queues: [...created.flatMap((p) => p.declaredNames().queues), ...extraQueues],
    exchanges: created.flatMap((p) => p.declaredNames().exchanges),
  });
});

describe.skipIf(skip)("rabbitmq provider against the real broker", () => {
  it("fails a publish to a queue deleted behind its back as unroutable, instead of dropping it", async () => {
    const p = provider();
    await p.connect();
    const destination = `/queue/${prefix}/unroutable`;
    await p.publish(destination, { body: 1 });
    await deleteTopology({ queues: [`${prefix}:.unroutable`], exchanges: [] });
    const error = await rejection(() => p.publish(destination, { body: 2 }));
    expect(error.reason).toBe("not-found");
    expect(error.message).toContain("unroutable");
    // The publish channel survives, and the next publish checks and re-declares the queue.
    await p.publish(`/queue/${prefix}/after-unroutable`, { body: 3 });
    await p.publish(destination, { body: 4 });
    const r = recorder();
    await p.subscribe(destination, r.handler, { subscription: "late" });
    await waitUntil(() => r.seen.length === 1, 5_000, "the message published after the re-declare");
    expect(r.seen[0]!.delivery.message.body).toBe(4);
  });

  it("re-declares a topic exchange deleted behind its back instead of failing every publish", async () => {
    const p = provider();
    await p.connect();
    const topic = `/topic/${prefix}/vanishing`;
    const r = recorder();
    await p.subscribe(topic, r.handler, { subscription: "watcher" });
    await p.publish(topic, { body: 1 });
    await deleteTopology({ queues: [], exchanges: [`${prefix}:.vanishing:x`] });
    await p.publish(topic, { body: 2 });
    await p.publish(topic, { body: 3, delayMs: 100 });
    // The binding went with the exchange; the provider restored it for its own subscription.
    await waitUntil(() => r.seen.length === 3, 5_000, "all three messages");
    expect(r.seen.map((s) => s.delivery.message.body)).toEqual([1, 2, 3]);
  });

  it("resumes consuming when the broker cancels the consumer because its queue was deleted", async () => {
    const p = provider();
    await p.connect();
    const destination = `/queue/${prefix}/cancelled`;
    const r = recorder();
    await p.subscribe(destination, r.handler, { subscription: "resilient" });
    await deleteTopology({ queues: [`${prefix}:.cancelled`], exchanges: [] });
    await waitUntil(
      async () => (await p.admin.stats({ destination })).consumers === 1,
      10_000,
      "the consumer to come back",
    );
    const { id } = await p.publish(destination, { body: "after" });
    await waitUntil(() => r.ids().includes(id), 5_000, "a delivery after the re-subscribe");
  });

  it("re-binds a topic subscription whose queue was deleted behind its back", async () => {
    const p = provider();
    await p.connect();
    const topic = `/topic/${prefix}/rebind`;
    const r = recorder();
    await p.subscribe(topic, r.handler, { subscription: "phoenix" });
    await deleteTopology({ queues: [`${prefix}:.rebind:sub.phoenix`], exchanges: [] });
    const source = { destination: topic, subscription: "phoenix" };
    await waitUntil(
      async () => (await p.admin.stats(source)).consumers === 1,
      10_000,
      "the consumer to come back",
    );
    const { id } = await p.publish(topic, { body: "after" });
    await waitUntil(() => r.ids().includes(id), 5_000, "a topic delivery after the re-bind");
  });

  it("aborts a handler that outlives handlerTimeoutMs and delivers its next attempt", async () => {
    const p = provider();
    await p.connect();
    const destination = `/queue/${prefix}/timeout`;
    let aborted = 0;
    const r = recorder(async (d, signal): Promise<HandlerResult> => {
      if (d.attempt > 1) return "ACKNOWLEDGED";
      await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
      aborted += 1;
      return "ACKNOWLEDGED";
    });
    await p.subscribe(destination, r.handler, {
      subscription: "slow",
      handlerTimeoutMs: 200,
      retry: { initialDelayMs: 100 },
    });
    const { id } = await p.publish(destination, { body: "slow" });
    await waitUntil(() => r.seen.length === 2, 5_000, "the second attempt");
    expect(aborted).toBe(1);
    expect(r.ids()).toEqual([id, id]);
    await waitUntil(() => p.counters().acked === 1, 5_000, "the redelivered copy to be acked");
  });

  it("reports a re-declare with other arguments clearly, without disturbing live consumers", async () => {
    const p = provider();
    await p.connect();
    const destination = `/queue/${prefix}/redeclare`;
    const first = recorder();
    await p.subscribe(destination, first.handler, { subscription: "plain" });
    const other = provider();
    await other.connect();
    const error = await rejection(() =>
      other.subscribe(destination, () => "ACKNOWLEDGED", { subscription: "ranked", maxPriority: 5 }),
    );
    expect(error.reason).toBe("rejected");
    expect(error.message).toContain("already exists with different arguments");
    expect(error.message).toContain("x-max-priority");
    expect(error.message, "the fix: keep the old levels, or drain and delete the queue").toContain(
      "delete_queue",
    );
    // Neither the other provider nor the first consumer is broken by it.
    const { id } = await other.publish(destination, { body: "still flowing" });
    await waitUntil(() => first.ids().includes(id), 5_000, "the first consumer to keep receiving");
  });

  it("a publish whose confirm never comes rejects with a timeout, never hangs", async () => {
    const proxy = await createFaultProxy({
      target: { host: new URL(RABBITMQ_URL).hostname, port: Number(new URL(RABBITMQ_URL).port || 5672) },
    });
    try {
      const p = provider({
        url: urlVia({ host: proxy.host, port: proxy.port }),
        publishTimeoutMs: 1_500,
        heartbeatSeconds: 30,
      });
      await p.connect();
      const destination = `/queue/${prefix}/stalled`;
      await p.publish(destination, { body: "warm-up" });
      proxy.stall();
      const started = Date.now();
      const error = await rejection(() => p.publish(destination, { body: "never confirmed" }));
      const took = Date.now() - started;
      expect(error.reason).toBe("timeout");
      expect(error.retryable).toBe(true);
      expect(took).toBeGreaterThanOrEqual(1_400);
      console.log(`[factflow/rabbitmq] unconfirmed publish rejected after ${took} ms`);
      // Declares and passive checks give up too, instead of queueing forever behind a silent broker.
      const statsError = await rejection(() => p.admin.stats({ destination }));
      expect(statsError.reason).toBe("timeout");
      proxy.resume();
      await p.publish(destination, { body: "after resume" });
      expect((await p.admin.stats({ destination })).depth).toBeGreaterThanOrEqual(2);
    } finally {
      await proxy.close();
    }
  });

  it("close() returns promptly even when the broker stalls mid-conversation", async () => {
    const target = { host: new URL(RABBITMQ_URL).hostname, port: Number(new URL(RABBITMQ_URL).port || 5672) };
    const proxy = await createFaultProxy({ target });
    try {
      const p = provider({ url: urlVia({ host: proxy.host, port: proxy.port }), heartbeatSeconds: 30 });
      await p.connect();
      const destination = `/queue/${prefix}/stalled-close`;
      await p.subscribe(destination, () => "ACKNOWLEDGED", { subscription: "stalled" });
      await p.publish(destination, { body: 1 });
      proxy.stall();
      const started = Date.now();
      await p.close();
      // That it returns at all is the property (the test's own timeout bounds it); the time is printed.
      console.log(`[factflow/rabbitmq] close under a stalled broker took ${Date.now() - started} ms`);
      // Nothing lingers: both sockets (consumer and publishing connection) are gone.
      await waitUntil(() => proxy.liveConnections() === 0, 2_000, "the provider's sockets to close");
    } finally {
      proxy.resume();
      await proxy.close();
    }
  });

  it("withholds a settlement meant for a channel that died, counts it superseded, and the broker redelivers", async () => {
    const proxy = await createFaultProxy({
      target: { host: new URL(RABBITMQ_URL).hostname, port: Number(new URL(RABBITMQ_URL).port || 5672) },
    });
    try {
      const p = provider({ url: urlVia({ host: proxy.host, port: proxy.port }) });
      await p.connect();
      const destination = `/queue/${prefix}/stale`;
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      const r = recorder(async (d) => {
        if (!d.redelivered && d.message.body === "held") await held;
        return "ACKNOWLEDGED" as const;
      });
      await p.subscribe(destination, r.handler, { subscription: "stale" });
      const { id } = await p.publish(destination, { body: "held" });
      await waitUntil(() => r.seen.length === 1, 5_000, "the first delivery");
      expect(proxy.cutAll()).toBeGreaterThan(0);
      await waitUntil(() => p.connectionCount() === 2, 15_000, "a reconnect");
      release();
      await waitUntil(
        () => r.seen.filter((s) => s.delivery.message.id === id).length === 2,
        15_000,
        "the redelivery",
      );
      await waitUntil(() => p.counters().acked === 1, 5_000, "the redelivered copy to be acked");
      expect(p.counters().superseded).toBe(1);
      expect(r.seen[1]!.delivery.redelivered).toBe(true);
      // The new channel was not closed by a stale ack: later messages still flow and settle.
      const { id: later } = await p.publish(destination, { body: "later" });
      await waitUntil(() => r.ids().includes(later), 5_000, "a later message");
      await waitUntil(
        async () => (await p.admin.stats({ destination })).depth === 0 && p.counters().acked === 2,
        5_000,
        "everything settled",
      );
    } finally {
      await proxy.close();
    }
  });

  it("holds publishes while the broker blocks the connection, and times them out if it stays blocked", async () => {
    const config = parseRabbitMqConfig({ url: RABBITMQ_URL, publishTimeoutMs: 800 });
    const connection = new ConnectionManager(config, silentLogger);
    const publisher = new Publisher(connection, config, silentLogger);
    await connection.connect();
    const queue = `${prefix}:.blocked`;
    extraQueues.push(queue);
    const setup = await connection.current()!.model.createChannel();
    await setup.assertQueue(queue, { durable: true });
    await setup.close();
    const target = { exchange: "", routingKey: queue, mandatory: true, describe: "/queue/blocked" };
    try {
      // RabbitMQ sends connection.blocked on a resource alarm; raising one would stall every user of
      // this shared broker, so the notification is replayed on the real connection instead.
      connection.current()!.model.emit("blocked", "low on memory");
      const waiting = publisher.publish(target, encodeMessage("/queue/blocked", { body: 1 }, 1024));
      let settled = false;
      void waiting.then(() => {
        settled = true;
      });
      await new Promise((r) => setTimeout(r, 300));
      expect(settled, "held while blocked").toBe(false);
      connection.current()!.model.emit("unblocked");
      await waiting;
      expect(settled, "confirmed once unblocked").toBe(true);

      connection.current()!.model.emit("blocked", "disk alarm");
      const error = await rejection(() =>
        publisher.publish(target, encodeMessage("/queue/blocked", { body: 2 }, 1024)),
      );
      expect(error.reason).toBe("timeout");
      expect(error.message).toContain("disk alarm");
      connection.current()!.model.emit("unblocked");
    } finally {
      await publisher.close();
      await connection.close();
    }
  });

  it("delays by one holding queue per delay, so a short delay never waits behind a long one", async () => {
    const p = provider();
    await p.connect();
    const destination = `/queue/${prefix}/delayed`;
    const r = recorder();
    await p.subscribe(destination, r.handler, { subscription: "delayed" });
    const started = Date.now();
    const { id: slow } = await p.publish(destination, { body: "slow", delayMs: 2_000 });
    const { id: fast } = await p.publish(destination, { body: "fast", delayMs: 200 });
    await waitUntil(() => r.seen.length === 2, 10_000, "both delayed messages");
    expect(r.ids()).toEqual([fast, slow]);
    expect(r.seen[0]!.at - started).toBeGreaterThanOrEqual(190);
    expect(r.seen[1]!.at - started).toBeGreaterThanOrEqual(1_990);
    const names = p.declaredNames().queues;
    expect(names).toContain(`${prefix}:.delayed:retry.2000`);
    expect(names).toContain(`${prefix}:.delayed:retry.200`);
  });

  it("delays topic messages too, to every subscription", async () => {
    const p = provider();
    await p.connect();
    const topic = `/topic/${prefix}/delayed`;
    const a = recorder();
    const b = recorder();
    await p.subscribe(topic, a.handler, { subscription: "a" });
    await p.subscribe(topic, b.handler, { subscription: "b" });
    const started = Date.now();
    await p.publish(topic, { body: "later", delayMs: 300 });
    await waitUntil(() => a.seen.length === 1 && b.seen.length === 1, 5_000, "both copies");
    expect(a.seen[0]!.at - started).toBeGreaterThanOrEqual(290);
    expect(b.seen[0]!.at - started).toBeGreaterThanOrEqual(290);
  });

  it("fifo subscriptions share the queue through a single active consumer", async () => {
    const p = provider();
    await p.connect();
    const destination = `/queue/${prefix}/sac`;
    const a = recorder();
    const b = recorder();
    await p.subscribe(destination, a.handler, { subscription: "a", ordering: "fifo" });
    await p.subscribe(destination, b.handler, { subscription: "b", ordering: "fifo" });
    const ids: string[] = [];
    for (let n = 0; n < 10; n++) ids.push((await p.publish(destination, { body: n })).id);
    await waitUntil(() => a.seen.length + b.seen.length === 10, 5_000, "all ten");
    expect(a.seen.length === 0 || b.seen.length === 0, "one active consumer takes everything").toBe(true);
    expect([...a.ids(), ...b.ids()]).toEqual(ids);
    expect((await p.admin.stats({ destination })).consumers).toBe(2);
  });

  it("dead-letters a foreign non-JSON message as rejected instead of looping on it", async () => {
    const p = provider();
    await p.connect();
    const destination = `/queue/${prefix}/foreign`;
    const r = recorder();
    await p.subscribe(destination, r.handler, { subscription: "foreign" });
    const raw = await amqp.connect(RABBITMQ_URL);
    try {
      const channel = await raw.createConfirmChannel();
      channel.sendToQueue(`${prefix}:.foreign`, Buffer.from("not json"), { messageId: "foreign-1" });
      await channel.waitForConfirms();
    } finally {
      await raw.close();
    }
    await waitUntil(
      async () => (await p.admin.stats({ destination })).dlqDepth === 1,
      5_000,
      "the dead letter",
    );
    const page = await p.admin.browseDeadLetters({ destination }, { offset: 0, limit: 5 });
    expect(page.items[0]!.reason).toBe("rejected");
    expect(page.items[0]!.lastError).toContain("not valid JSON");
    expect(r.seen.length).toBe(0);
  });

  it("refuses every call before connect and after close with a clear code", async () => {
    const p = provider();
    const destination = `/queue/${prefix}/lifecycle`;
    const before = await rejection(() => p.admin.redriveAll({ destination }));
    expect(before.code).toBe("provider_not_connected");
    expect((await rejection(() => p.publish(destination, { body: 1 }))).code).toBe("provider_not_connected");
    await p.connect();
    await p.close();
    for (const call of [
      () => p.admin.listDestinations(),
      () => p.admin.redriveAll({ destination }),
      () => p.admin.redriveOne({ destination }, "x"),
      () => p.admin.discardOne({ destination }, "x"),
      () => p.connect(),
    ]) {
      expect((await rejection(call)).code).toBe("provider_closed");
    }
  });

  it("uses dead-letter and holding queues that exist with other arguments instead of failing", async () => {
    const p = provider();
    await p.connect();
    const destination = `/queue/${prefix}/preexisting`;
    // The dead-letter queue is consumed elsewhere as a FIFO queue, and another process made the
    // 100 ms holding queue with a different idle expiry.
    await p.subscribe(`${destination}.dlq`, () => "ACKNOWLEDGED", {
      subscription: "dlq-reader",
      ordering: "fifo",
    });
    const raw = await amqp.connect(RABBITMQ_URL);
    const holding = `${prefix}:.preexisting:retry.100`;
    extraQueues.push(holding);
    try {
      const channel = await raw.createChannel();
      await channel.assertQueue(holding, {
        durable: true,
        arguments: {
          "x-message-ttl": 100,
          "x-dead-letter-exchange": "",
          "x-dead-letter-routing-key": `${prefix}:.preexisting`,
          "x-expires": 3_600_000,
        },
      });
    } finally {
      await raw.close();
    }
    const r = recorder((d) =>
      d.message.body === "retry" && d.attempt === 1
        ? "FAILED"
        : d.message.body === "reject"
          ? "REJECTED"
          : "ACKNOWLEDGED",
    );
    await p.subscribe(destination, r.handler, { subscription: "main", retry: { initialDelayMs: 100 } });
    await p.publish(destination, { body: "retry" });
    await p.publish(destination, { body: "reject" });
    await waitUntil(
      () => p.counters().retried === 1 && p.counters().deadLettered === 1,
      5_000,
      "a retry and a dead letter",
    );
    await waitUntil(
      () => r.seen.filter((s) => s.delivery.message.body === "retry").length === 2,
      5_000,
      "the retried attempt",
    );
  });

  it("counts what it did", async () => {
    const p = provider();
    await p.connect();
    const destination = `/queue/${prefix}/counted`;
    const r = recorder((d) =>
      d.message.body === "fail" && d.attempt === 1
        ? "FAILED"
        : d.message.body === "reject"
          ? "REJECTED"
          : "ACKNOWLEDGED",
    );
    await p.subscribe(destination, r.handler, { subscription: "counted", retry: { initialDelayMs: 50 } });
    for (const body of ["ok", "fail", "reject"]) await p.publish(destination, { body });
    await waitUntil(() => p.counters().acked === 2 && p.counters().deadLettered === 1, 5_000, "settlements");
    expect(p.counters()).toMatchObject({ retried: 1, deadLettered: 1, acked: 2, superseded: 0, lost: 0 });
    // Only the 3 caller publishes: the retry and dead-letter copies count as retried/deadLettered.
    expect(p.counters().published).toBe(3);
    expect(p.counters().confirmed).toBe(3);
    expect(p.counters().redelivered).toBe(0);
  });
});
