import { getEventListeners } from "node:events";
import { DeliveryLostError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { type Abortable, DeliverySignal } from "../src/delivery/delivery-signal.js";
import { Semaphore, Watermark } from "../src/delivery/semaphore.js";

describe("DeliverySignal", () => {
  it("aborts with the provider's or the execution's signal while the delivery runs", () => {
    const provider = new AbortController();
    const execution = new AbortController();
    const registry = new Set<Abortable>();
    const signal = new DeliverySignal(provider.signal, execution.signal, registry);
    expect(signal.aborted).toBe(false);
    const made = signal.signal;
    expect(registry.size).toBe(1);
    provider.abort(new Error("timed out"));
    expect(made.aborted).toBe(true);
    expect(signal.aborted).toBe(true);
    expect(String(signal.reason)).toContain("timed out");
    signal.dispose();
    expect(registry.size).toBe(0);
  });

  it("does not cancel a lost delivery's work before its deadline; tells a parked wait at once", async () => {
    const provider = new AbortController();
    const execution = new AbortController();
    const registry = new Set<Abortable>();
    const signal = new DeliverySignal(provider.signal, execution.signal, registry, Date.now() + 60_000);
    const made = signal.signal;
    let cancelled = 0;
    let lost = 0;
    signal.onCancel(() => cancelled++);
    signal.onLost(() => lost++);
    provider.abort(new DeliveryLostError("/queue/q"));
    expect(lost).toBe(1);
    expect(signal.aborted).toBe(false);
    expect(made.aborted).toBe(false);
    expect(cancelled).toBe(0);
    // The execution still cancels it.
    execution.abort(new Error("execution cancelled"));
    for (const abortable of registry) abortable.abort(execution.signal.reason);
    expect(made.aborted).toBe(true);
    expect(cancelled).toBe(1);
    signal.dispose();
  });

  it("cancels a lost delivery's work at its deadline", async () => {
    const provider = new AbortController();
    const execution = new AbortController();
    const signal = new DeliverySignal(provider.signal, execution.signal, new Set(), Date.now() + 20);
    const made = signal.signal;
    const cancelled = new Promise<void>((resolve) => signal.onCancel(resolve));
    provider.abort(new DeliveryLostError("/queue/q"));
    expect(made.aborted).toBe(false);
    await cancelled;
    await new Promise<void>((resolve) =>
      made.aborted ? resolve() : made.addEventListener("abort", () => resolve()),
    );
    expect(signal.aborted).toBe(true);
    expect(String(signal.reason)).toContain("went back to the broker");
    signal.dispose();
  });

  it("lets go of the provider's signal once disposed: only the execution cancels a later reader", () => {
    const provider = new AbortController();
    const execution = new AbortController();
    const registry = new Set<Abortable>();
    const signal = new DeliverySignal(provider.signal, execution.signal, registry);
    signal.dispose();
    // The provider may hand its signal to the next delivery, which may time out: not this one's business.
    provider.abort(new Error("another delivery timed out"));
    expect(signal.aborted).toBe(false);
    const late = signal.signal;
    expect(late).toBe(execution.signal);
    expect(registry.size).toBe(0);
    execution.abort(new Error("execution cancelled"));
    expect(signal.aborted).toBe(true);
    expect(String(signal.reason)).toContain("execution cancelled");
  });

  it("onCancel runs its listener once on the provider's abort, without making an AbortSignal", () => {
    const provider = new AbortController();
    const execution = new AbortController();
    const registry = new Set<Abortable>();
    const signal = new DeliverySignal(provider.signal, execution.signal, registry);
    let calls = 0;
    signal.onCancel(() => calls++);
    expect(registry.size).toBe(1);
    provider.abort(new Error("timed out"));
    execution.abort(new Error("cancelled too"));
    expect(calls).toBe(1);
    expect(String(signal.reason)).toContain("timed out");
    // The provider's signal let go of its listener when it fired; the registry entry goes at dispose.
    expect(getEventListeners(provider.signal, "abort")).toHaveLength(0);
    signal.dispose();
    expect(registry.size).toBe(0);
  });

  it("onCancel puts one listener on the provider's signal however many waits, all gone after dispose", () => {
    const provider = new AbortController();
    const registry = new Set<Abortable>();
    const signal = new DeliverySignal(provider.signal, new AbortController().signal, registry);
    let calls = 0;
    const removes = Array.from({ length: 5 }, () => signal.onCancel(() => calls++));
    expect(getEventListeners(provider.signal, "abort")).toHaveLength(1);
    expect(registry.size).toBe(1);
    for (const remove of removes.slice(0, 3)) remove();
    provider.abort(new Error("timed out"));
    // Only the two waits still registered ran, once each.
    expect(calls).toBe(2);
    signal.dispose();
    expect(getEventListeners(provider.signal, "abort")).toHaveLength(0);
    expect(registry.size).toBe(0);
  });

  it("a wait that outlives dispose keeps only the execution's cancellation, until it is removed", () => {
    const provider = new AbortController();
    const execution = new AbortController();
    const registry = new Set<Abortable>();
    const signal = new DeliverySignal(provider.signal, execution.signal, registry);
    let calls = 0;
    const remove = signal.onCancel(() => calls++);
    signal.dispose();
    // The provider may hand its signal to another delivery now: nothing of this one is left on it.
    expect(getEventListeners(provider.signal, "abort")).toHaveLength(0);
    provider.abort(new Error("reused elsewhere"));
    expect(calls).toBe(0);
    expect(registry.size).toBe(1);
    execution.abort(new Error("execution cancelled"));
    for (const entry of [...registry]) entry.abort(execution.signal.reason);
    expect(calls).toBe(1);
    remove();
    expect(registry.size).toBe(0);
  });

  it("onCancel hears the execution's abort through the route's registry, and removal detaches it", () => {
    const provider = new AbortController();
    const execution = new AbortController();
    const registry = new Set<Abortable>();
    const signal = new DeliverySignal(provider.signal, execution.signal, registry);
    let removedCalls = 0;
    const remove = signal.onCancel(() => removedCalls++);
    remove();
    let calls = 0;
    signal.onCancel(() => calls++);
    // What the route does when the execution's signal aborts.
    execution.abort(new Error("execution cancelled"));
    for (const entry of [...registry]) entry.abort(execution.signal.reason);
    expect(calls).toBe(1);
    expect(removedCalls).toBe(0);
    expect(String(signal.reason)).toContain("execution cancelled");
    signal.dispose();
    expect(registry.size).toBe(0);
    expect(getEventListeners(provider.signal, "abort")).toHaveLength(0);
    provider.abort(new Error("later"));
    expect(calls).toBe(1);
  });

  it("cuts a slot or watermark wait short, rejecting with the delivery's reason", async () => {
    const provider = new AbortController();
    const registry = new Set<Abortable>();
    const signal = new DeliverySignal(provider.signal, new AbortController().signal, registry);
    const slots = new Semaphore(1);
    await slots.acquire();
    const waiting = slots.acquire(signal);
    const after = slots.acquire();
    const watermark = new Watermark(1);
    watermark.add(1);
    const below = watermark.whenBelow(signal);
    provider.abort(new Error("handler timed out"));
    await expect(waiting).rejects.toThrow("handler timed out");
    await expect(below).rejects.toThrow("handler timed out");
    // The aborted waiter gave up its place: the next one gets the permit.
    slots.release();
    await after;
    signal.dispose();
    expect(registry.size).toBe(0);
    expect(getEventListeners(provider.signal, "abort")).toHaveLength(0);
  });
});
