import {
  type Delivery,
  type DurabilityCounters,
  type HandlerResult,
  Headers,
  type MessageHandler,
  MessageStatus,
  ProviderError,
  type SettledDelivery,
  type SubscribeOptions,
} from "@factflow/protocols";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  COPY_FAILURE_PAUSE_MS,
  type CopyOutcome,
  emptyDurabilityCounters,
  envelopeFromHeaders,
  type HandBackCause,
  resolveSubscribeOptions,
  type SettlementCopy,
  type SubscriptionPort,
  SubscriptionRuntime,
} from "../src/index.js";

/** One delivery of the in-test broker. */
interface Msg {
  readonly id: string;
  readonly headers: Record<string, string>;
  /** JSON text; anything else is undecodable. */
  readonly body: string;
  current: boolean;
}

type Call =
  | { readonly op: "receive" | "stopReceiving" | "close" }
  | { readonly op: "ack" | "release"; readonly id: string }
  | { readonly op: "handBack"; readonly id: string; readonly cause: HandBackCause }
  | { readonly op: "copy"; readonly id: string; readonly copy: SettlementCopy };

/**
 * A port that records every call, in order, and lets a test wait for a call (no sleeps). What
 * `publishCopy` and `ack` answer is set per test.
 */
function testPort() {
  const calls: Call[] = [];
  const waiters: { test: (call: Call) => boolean; resolve: (call: Call) => void }[] = [];
  let deliver: ((delivery: Msg, redelivered: boolean) => void) | undefined;
  const record = (call: Call) => {
    calls.push(call);
    for (const waiter of [...waiters]) {
      if (!waiter.test(call)) continue;
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(call);
    }
  };
  const state = {
    calls,
    copy: (_copy: SettlementCopy): Promise<CopyOutcome> => Promise.resolve("confirmed"),
    ackAnswer: true,
    /** Resolves with the first call (already made or to come) that `test` accepts. */
    next(test: (call: Call) => boolean): Promise<Call> {
      const made = calls.find(test);
      if (made !== undefined) return Promise.resolve(made);
      return new Promise((resolve) => waiters.push({ test, resolve }));
    },
    deliver(message: Msg, redelivered = false) {
      deliver?.(message, redelivered);
    },
    ops: () => calls.map((c) => ("id" in c ? `${c.op}:${c.id}` : c.op)),
  };
  const port: SubscriptionPort<Msg> = {
    async receive(sink) {
      deliver = sink;
      record({ op: "receive" });
    },
    async stopReceiving() {
      record({ op: "stopReceiving" });
    },
    decode(message) {
      try {
        return envelopeFromHeaders({ ...message.headers }, JSON.parse(message.body));
      } catch (error) {
        return { error: String(error), headers: message.headers };
      }
    },
    isCurrent: (message) => message.current,
    ack(message) {
      record({ op: "ack", id: message.id });
      return state.ackAnswer;
    },
    handBack(message, cause) {
      record({ op: "handBack", id: message.id, cause });
      return true;
    },
    publishCopy(message, copy) {
      record({ op: "copy", id: message.id, copy });
      return state.copy(copy);
    },
    classifyError: (error, operation) =>
      error instanceof ProviderError
        ? error
        : new ProviderError("test", "unknown", `${operation}: ${String(error)}`),
    release(message) {
      record({ op: "release", id: message.id });
    },
    async close() {
      record({ op: "close" });
    },
  };
  return { port, state };
}

function message(id: string, body: unknown = { id }, headers: Record<string, string> = {}): Msg {
  return {
    id,
    headers: { [Headers.messageId]: id, ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
    current: true,
  };
}

const CAPS = { fifo: true, messageGroups: true, priorities: false } as const;

async function started(
  handler: MessageHandler,
  options: Partial<SubscribeOptions> = {},
  destination = "/queue/orders",
) {
  const { port, state } = testPort();
  const counters: DurabilityCounters = emptyDurabilityCounters();
  const settled: SettledDelivery[] = [];
  const runtime = new SubscriptionRuntime({
    provider: "test",
    destination,
    handler,
    options: resolveSubscribeOptions(
      { subscription: "sub", onSettled: (s) => settled.push(s), ...options },
      CAPS,
    ),
    port,
    counters,
  });
  await runtime.start();
  return { runtime, state, counters, settled };
}

/** A handler each delivery of which waits until the test answers it. */
function heldHandler() {
  const started: { delivery: Delivery; signal: AbortSignal; answer: (r: HandlerResult) => void }[] = [];
  const waiters: (() => void)[] = [];
  const handler: MessageHandler = (delivery, signal) =>
    new Promise<HandlerResult>((answer) => {
      started.push({ delivery, signal, answer });
      for (const w of waiters.splice(0)) w();
    });
  const until = async (n: number) => {
    while (started.length < n) await new Promise<void>((resolve) => waiters.push(resolve));
  };
  return { handler, started, until };
}

/** Copies the port was asked to publish so far. */
function copies(state: ReturnType<typeof testPort>["state"]): number {
  return state.calls.filter((c) => c.op === "copy").length;
}

afterEach(() => {
  vi.useRealTimers();
});

describe("SubscriptionRuntime", () => {
  it("acknowledges an ACKNOWLEDGED delivery, reports it once, and releases it", async () => {
    const { runtime, state, counters, settled } = await started(() => MessageStatus.ACKNOWLEDGED);
    state.deliver(message("m1"));
    await state.next((c) => c.op === "release");
    expect(state.ops()).toEqual(["receive", "ack:m1", "release:m1"]);
    expect(settled).toEqual([
      { kind: "acked", destination: "/queue/orders", subscription: "sub", messageId: "m1", attempt: 1 },
    ]);
    expect(counters.acked).toBe(1);
    expect(runtime.unsettled).toBe(0);
  });

  it("reuses the signal of a handler that declares one parameter, and gives a two-parameter handler its own", async () => {
    const signals = { one: [] as unknown[], two: [] as unknown[] };
    // Declares one parameter; `arguments` shows what it was handed.
    const one = await started(function (this: unknown, _delivery: Delivery) {
      // biome-ignore lint/complexity/noArguments: the test reads what a one-parameter handler is handed
      signals.one.push(arguments[1]);
      return MessageStatus.ACKNOWLEDGED;
    } as MessageHandler);
    const two = await started((_delivery, signal) => {
      signals.two.push(signal);
      return MessageStatus.ACKNOWLEDGED;
    });
    for (const { state } of [one, two]) {
      state.deliver(message("m1"));
      await state.next((c) => c.op === "release" && c.id === "m1");
      state.deliver(message("m2"));
      await state.next((c) => c.op === "release" && c.id === "m2");
    }
    expect(signals.one).toHaveLength(2);
    expect(signals.one[0]).toBe(signals.one[1]);
    expect(signals.two).toHaveLength(2);
    expect(signals.two[0]).not.toBe(signals.two[1]);
  });

  it("publishes a FAILED delivery's retry copy, then acknowledges the original once it is confirmed", async () => {
    let confirm!: (outcome: CopyOutcome) => void;
    const { state, counters, settled } = await started(
      () => ({ status: MessageStatus.FAILED, reason: "busy" }),
      { retry: { maxAttempts: 3, initialDelayMs: 100, multiplier: 2 } },
    );
    state.copy = () => new Promise((resolve) => (confirm = resolve));
    state.deliver(message("m1"));
    const call = await state.next((c) => c.op === "copy");
    expect(state.ops(), "nothing acknowledged before the copy is confirmed").not.toContain("ack:m1");
    const copy = (call as Extract<Call, { op: "copy" }>).copy;
    expect(copy.kind).toBe("retry");
    expect(copy.headers[Headers.deliveryAttempt]).toBe("2");
    expect(copy.headers[Headers.lastError]).toBe("busy");
    expect(copy.verdict).toMatchObject({ nextAttempt: 2, delayMs: 100, incomplete: false });
    confirm("confirmed");
    await state.next((c) => c.op === "release");
    expect(state.ops()).toEqual(["receive", "copy:m1", "ack:m1", "release:m1"]);
    expect(settled.map((s) => s.kind)).toEqual(["retried"]);
    expect(counters.retried).toBe(1);
  });

  it("dead-letters a REJECTED topic delivery with the subscription as its origin", async () => {
    const { state, counters, settled } = await started(() => MessageStatus.REJECTED, {}, "/topic/news");
    state.deliver(message("m1"));
    const call = (await state.next((c) => c.op === "copy")) as Extract<Call, { op: "copy" }>;
    expect(call.copy.kind).toBe("dead");
    expect(call.copy.headers).toMatchObject({
      [Headers.deadLetterReason]: "rejected",
      [Headers.originalDestination]: "/topic/news",
      [Headers.originalSubscription]: "sub",
    });
    await state.next((c) => c.op === "release");
    expect(settled).toMatchObject([{ kind: "dead-lettered", reason: "rejected", undecodable: false }]);
    expect(counters.deadLettered).toBe(1);
  });

  it("dead-letters an undecodable message without running the handler", async () => {
    const handler = vi.fn(() => MessageStatus.ACKNOWLEDGED);
    const { state, settled } = await started(handler);
    state.deliver(message("m1", "{not json"));
    await state.next((c) => c.op === "release");
    expect(handler).not.toHaveBeenCalled();
    expect(state.ops()).toEqual(["receive", "copy:m1", "ack:m1", "release:m1"]);
    expect(settled).toMatchObject([
      { kind: "dead-lettered", reason: "rejected", undecodable: true, messageId: undefined, attempt: 1 },
    ]);
  });

  it("does not acknowledge after a copy the port settled itself; a superseded copy is counted, not reported", async () => {
    const { state, counters, settled } = await started(() => MessageStatus.REJECTED);
    state.copy = () => Promise.resolve("settled");
    state.deliver(message("m1"));
    await state.next((c) => c.op === "release");
    state.copy = () => Promise.resolve("superseded");
    state.deliver(message("m2"));
    await state.next((c) => c.op === "release" && c.id === "m2");
    expect(state.ops()).toEqual(["receive", "copy:m1", "release:m1", "copy:m2", "release:m2"]);
    expect(settled.map((s) => s.messageId)).toEqual(["m1"]);
    expect(counters).toMatchObject({ deadLettered: 1, superseded: 1 });
  });

  it("withholds the settlement of a delivery the broker reissued meanwhile (superseded)", async () => {
    const held = heldHandler();
    const { state, counters, settled } = await started(held.handler, { concurrency: 2 });
    const stale = message("m1");
    state.deliver(stale);
    state.deliver(message("m2"));
    await held.until(2);
    stale.current = false;
    held.started[0]?.answer(MessageStatus.ACKNOWLEDGED);
    await state.next((c) => c.op === "release" && c.id === "m1");
    state.ackAnswer = false;
    held.started[1]?.answer(MessageStatus.ACKNOWLEDGED);
    await state.next((c) => c.op === "release" && c.id === "m2");
    expect(state.ops()).toEqual(["receive", "release:m1", "ack:m2", "release:m2"]);
    expect(settled).toEqual([]);
    expect(counters).toMatchObject({ acked: 0, superseded: 2 });
  });

  it("runs at most `concurrency` handlers, in arrival order, and counts flagged redeliveries", async () => {
    const held = heldHandler();
    const { runtime, state, counters } = await started(held.handler, { concurrency: 2, prefetch: 4 });
    for (const id of ["a", "b", "c", "d"]) state.deliver(message(id), id === "c");
    await held.until(2);
    expect(held.started.map((s) => s.delivery.message.id)).toEqual(["a", "b"]);
    expect([runtime.running, runtime.waiting, runtime.unsettled]).toEqual([2, 2, 4]);
    held.started[1]?.answer(MessageStatus.ACKNOWLEDGED);
    await held.until(3);
    expect(held.started[2]?.delivery).toMatchObject({ redelivered: true, attempt: 1 });
    expect(counters.redelivered).toBe(1);
    for (const s of held.started) s.answer(MessageStatus.ACKNOWLEDGED);
    await held.until(4);
    held.started[3]?.answer(MessageStatus.ACKNOWLEDGED);
    await state.next((c) => c.op === "release" && c.id === "d");
    expect(counters.acked).toBe(4);
  });

  it("runs a FIFO subscription without a group key one delivery at a time", async () => {
    const { runtime } = await started(() => MessageStatus.ACKNOWLEDGED, {
      ordering: "fifo",
      concurrency: 4,
      prefetch: 8,
    });
    expect([runtime.concurrency, runtime.prefetch]).toEqual([1, 1]);
  });

  it("counts a handler past its timeout as an incomplete attempt", async () => {
    const { state, counters, settled } = await started(() => new Promise<never>(() => {}), {
      handlerTimeoutMs: 20,
    });
    state.deliver(message("m1"));
    const call = (await state.next((c) => c.op === "copy")) as Extract<Call, { op: "copy" }>;
    expect(call.copy.verdict).toMatchObject({ kind: "retry", incomplete: true, nextAttempt: 2 });
    await state.next((c) => c.op === "release");
    expect(settled).toMatchObject([{ kind: "retried", incomplete: true }]);
    expect(counters).toMatchObject({ redelivered: 1, retried: 0 });
  });

  it("stops receiving, hands back the running delivery (reported) and the waiting ones (not), then closes", async () => {
    const held = heldHandler();
    const { runtime, state, settled } = await started(held.handler, { prefetch: 3 });
    state.deliver(message("run"));
    state.deliver(message("wait"));
    await held.until(1);
    let stopCalls = 0;
    const stopped = runtime.unsubscribe().then(() => {
      stopCalls += 1;
    });
    expect(runtime.unsubscribe(), "unsubscribe twice is the same stop").toBe(runtime.unsubscribe());
    await state.next((c) => c.op === "stopReceiving");
    state.deliver(message("late"));
    await stopped;
    expect(held.started[0]?.signal.aborted, "the running handler was aborted").toBe(true);
    const handedBack = state.calls.filter((c) => c.op === "handBack");
    expect(handedBack.sort((a, b) => a.id.localeCompare(b.id))).toEqual([
      { op: "handBack", id: "late", cause: "not-run" },
      { op: "handBack", id: "run", cause: "stopped" },
      { op: "handBack", id: "wait", cause: "not-run" },
    ]);
    expect(state.ops().at(-1)).toBe("close");
    expect(state.ops().indexOf("stopReceiving")).toBe(1);
    expect(settled).toMatchObject([{ kind: "handed-back", messageId: "run" }]);
    expect([runtime.unsettled, stopCalls]).toEqual([0, 1]);
  });

  it("a stop settles a delivery whose handler returned and awaits its settleAfter, before it closes", async () => {
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    const held = heldHandler();
    const { runtime, state, settled } = await started(held.handler, { concurrency: 1, prefetch: 2 });
    state.deliver(message("a"));
    await held.until(1);
    held.started[0]?.answer({ status: MessageStatus.ACKNOWLEDGED, settleAfter: committed });
    state.deliver(message("b"));
    await held.until(2);
    const stopped = runtime.unsubscribe();
    await state.next((c) => c.op === "handBack" && c.id === "b");
    expect(state.ops(), "nothing of a settled before its settleAfter").not.toContain("handBack:a");
    commit();
    await stopped;
    const ops = state.ops();
    expect(ops.slice(0, 3)).toEqual(["receive", "stopReceiving", "handBack:b"]);
    // Each delivery in its own order; the two deliveries' steps may interleave.
    expect([...ops.slice(3, 6)].sort()).toEqual(["ack:a", "release:a", "release:b"]);
    expect(ops.indexOf("ack:a")).toBeLessThan(ops.indexOf("release:a"));
    expect(ops.at(-1)).toBe("close");
    expect(ops).toHaveLength(7);
    expect(settled.map((s) => [s.kind, s.messageId])).toEqual([
      ["handed-back", "b"],
      ["acked", "a"],
    ]);
  });

  it("hands the original back after the pause when its copy is not confirmed; retries a retryable copy", async () => {
    vi.useFakeTimers();
    const { state, counters, settled } = await started(() => MessageStatus.REJECTED);
    const failures = [
      new ProviderError("test", "connection", "link lost"),
      new ProviderError("test", "rejected", "refused"),
    ];
    state.copy = () => Promise.reject(failures.shift() ?? new Error("unexpected"));
    state.deliver(message("m1"));
    await state.next(() => copies(state) === 2);
    expect(state.ops(), "not handed back before the pause").not.toContain("handBack:m1");
    await vi.advanceTimersByTimeAsync(COPY_FAILURE_PAUSE_MS);
    await state.next((c) => c.op === "release");
    expect(state.calls.filter((c) => c.op === "handBack")).toEqual([
      { op: "handBack", id: "m1", cause: "copy-failed" },
    ]);
    expect(settled).toEqual([]);
    expect(counters.deadLettered).toBe(0);
  });

  it("stops itself and rejects when the port cannot start its consumer", async () => {
    const { port, state } = testPort();
    const refused = new ProviderError("test", "not-found", "no such queue");
    const stops: string[] = [];
    const runtime = new SubscriptionRuntime({
      provider: "test",
      destination: "/queue/orders",
      handler: () => MessageStatus.ACKNOWLEDGED,
      options: resolveSubscribeOptions({ subscription: "sub" }, CAPS),
      port: { ...port, receive: () => Promise.reject(refused) },
      counters: emptyDurabilityCounters(),
      onStop: () => stops.push("onStop"),
    });
    await expect(runtime.start()).rejects.toBe(refused);
    expect([...stops, ...state.ops()]).toEqual(["onStop", "stopReceiving", "close"]);
  });

  it("does not send a copy again after its confirmation timed out", async () => {
    vi.useFakeTimers();
    const { state } = await started(() => MessageStatus.REJECTED);
    state.copy = () => Promise.reject(new ProviderError("test", "timeout", "no receipt"));
    state.deliver(message("m1"));
    await state.next((c) => c.op === "copy");
    await vi.advanceTimersByTimeAsync(COPY_FAILURE_PAUSE_MS);
    await state.next((c) => c.op === "release");
    expect(state.ops()).toEqual(["receive", "copy:m1", "handBack:m1", "release:m1"]);
  });

  it("acknowledges only once the handler's settleAfter has settled, even past the handler's timeout", async () => {
    vi.useFakeTimers();
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    // Tells the test when the runtime starts awaiting the promise (the handler has returned).
    let awaiting!: () => void;
    const awaited = new Promise<void>((resolve) => (awaiting = resolve));
    const settleAfter: PromiseLike<void> = {
      // biome-ignore lint/suspicious/noThenProperty: a thenable that reports when it is awaited
      then(onFulfilled, onRejected) {
        awaiting();
        return committed.then(onFulfilled, onRejected);
      },
    };
    const { state, counters, settled } = await started(
      () => ({ status: MessageStatus.ACKNOWLEDGED, settleAfter }),
      { handlerTimeoutMs: 20 },
    );
    state.deliver(message("m1"));
    await awaited;
    await vi.advanceTimersByTimeAsync(100);
    expect(state.ops(), "no acknowledgement before settleAfter settles").toEqual(["receive"]);
    commit();
    await state.next((c) => c.op === "release");
    expect(state.ops()).toEqual(["receive", "ack:m1", "release:m1"]);
    expect(settled.map((s) => s.kind)).toEqual(["acked"]);
    expect(counters).toMatchObject({ acked: 1, redelivered: 0 });
  });

  it("drops waiting deliveries the port no longer holds, unrun and unsettled", async () => {
    const held = heldHandler();
    const { runtime, state, counters, settled } = await started(held.handler, { prefetch: 4 });
    const gone = [message("b"), message("c")];
    state.deliver(message("a"));
    for (const m of gone) state.deliver(m);
    state.deliver(message("d"));
    await held.until(1);
    expect(runtime.waiting).toBe(3);
    for (const m of gone) m.current = false;
    runtime.dropStale();
    expect([runtime.waiting, runtime.unsettled]).toEqual([1, 2]);
    held.started[0]?.answer(MessageStatus.ACKNOWLEDGED);
    await held.until(2);
    expect(held.started.map((s) => s.delivery.message.id)).toEqual(["a", "d"]);
    held.started[1]?.answer(MessageStatus.ACKNOWLEDGED);
    await state.next((c) => c.op === "release" && c.id === "d");
    expect(state.ops()).toEqual([
      "receive",
      "release:b",
      "release:c",
      "ack:a",
      "release:a",
      "ack:d",
      "release:d",
    ]);
    expect(settled.map((s) => s.messageId)).toEqual(["a", "d"]);
    expect(counters).toMatchObject({ acked: 2, superseded: 0 });
  });

  it("aborts a running handler whose delivery the port no longer holds, and settles nothing of it", async () => {
    const held = heldHandler();
    const { runtime, state, counters, settled } = await started(held.handler, {
      prefetch: 4,
      concurrency: 2,
    });
    const lost = message("a");
    state.deliver(lost);
    state.deliver(message("b"));
    await held.until(2);
    // The channel of "a" closed: the broker hands it out again, so its handler must let go of it
    // (a batch member would otherwise hold it, and its claim, until a timer), and "b" runs on.
    lost.current = false;
    runtime.dropStale();
    const [first, second] = held.started;
    expect(first?.signal.aborted).toBe(true);
    expect(first?.signal.reason).toBeInstanceOf(Error);
    expect(second?.signal.aborted).toBe(false);
    await state.next((c) => c.op === "release" && c.id === "a");
    second?.answer(MessageStatus.ACKNOWLEDGED);
    await state.next((c) => c.op === "release" && c.id === "b");
    // Stale: neither acknowledged nor handed back (the broker has it already), only released.
    expect(state.ops()).toEqual(["receive", "release:a", "ack:b", "release:b"]);
    expect(settled.map((s) => s.messageId)).toEqual(["b"]);
    // A late answer of the aborted handler settles nothing.
    first?.answer(MessageStatus.ACKNOWLEDGED);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(state.ops()).toEqual(["receive", "release:a", "ack:b", "release:b"]);
    expect(counters).toMatchObject({ acked: 1 });
  });

  it("skips a waiting delivery that went stale before its turn, without running it", async () => {
    const held = heldHandler();
    const { state, counters } = await started(held.handler, { prefetch: 4 });
    const stale = message("b");
    state.deliver(message("a"));
    state.deliver(stale);
    state.deliver(message("c"));
    await held.until(1);
    stale.current = false;
    held.started[0]?.answer(MessageStatus.ACKNOWLEDGED);
    await held.until(2);
    expect(held.started.map((s) => s.delivery.message.id)).toEqual(["a", "c"]);
    held.started[1]?.answer(MessageStatus.ACKNOWLEDGED);
    await state.next((c) => c.op === "release" && c.id === "c");
    expect(state.calls.filter((c) => c.op !== "release" && "id" in c && c.id === "b")).toEqual([]);
    expect(counters).toMatchObject({ acked: 2, superseded: 0 });
  });

  it("gives the slot of a handler awaiting only its settleAfter to the next delivery", async () => {
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    const held = heldHandler();
    const { runtime, state } = await started(held.handler, { concurrency: 1, prefetch: 2 });
    state.deliver(message("a"));
    state.deliver(message("b"));
    await held.until(1);
    held.started[0]?.answer({ status: MessageStatus.ACKNOWLEDGED, settleAfter: committed });
    await held.until(2);
    expect(held.started.map((s) => s.delivery.message.id)).toEqual(["a", "b"]);
    expect([runtime.running, runtime.unsettled], "a still unsettled, b running").toEqual([1, 2]);
    expect(state.ops()).toEqual(["receive"]);
    held.started[1]?.answer(MessageStatus.ACKNOWLEDGED);
    await state.next((c) => c.op === "release" && c.id === "b");
    expect(state.ops(), "a not acknowledged before its settleAfter").not.toContain("ack:a");
    commit();
    await state.next((c) => c.op === "release" && c.id === "a");
    expect([runtime.running, runtime.unsettled]).toEqual([0, 0]);
  });

  it("tells the port a handler slot is free once a handler returns, before its settleAfter lets the delivery go", async () => {
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    const held = heldHandler();
    const { port, state } = testPort();
    let freed = 0;
    let freedWhileUnsettled = 0;
    let firstFree!: () => void;
    const wasFreed = new Promise<void>((resolve) => (firstFree = resolve));
    const runtime: SubscriptionRuntime<Msg> = new SubscriptionRuntime({
      provider: "test",
      destination: "/queue/orders",
      handler: held.handler,
      options: resolveSubscribeOptions({ subscription: "sub", concurrency: 1, prefetch: 2 }, CAPS),
      port: {
        ...port,
        handlerFreed() {
          freed += 1;
          if (runtime.unsettled > 0 && runtime.running === 0) freedWhileUnsettled += 1;
          firstFree();
        },
      },
      counters: emptyDurabilityCounters(),
    });
    await runtime.start();
    state.deliver(message("a"));
    await held.until(1);
    held.started[0]?.answer({ status: MessageStatus.ACKNOWLEDGED, settleAfter: committed });
    await wasFreed;
    expect([freed, freedWhileUnsettled], "freed once, a still unsettled").toEqual([1, 1]);
    expect(state.ops(), "a neither acknowledged nor released before its settleAfter").toEqual(["receive"]);
    commit();
    await state.next((c) => c.op === "release" && c.id === "a");
    expect(freed, "the slot is freed once per delivery").toBe(1);
  });
});
