import { describe, expect, it } from "vitest";
import { DeliverySignal } from "../src/delivery-signal.js";

describe("DeliverySignal", () => {
  it("aborts with the provider's or the execution's signal while the delivery runs", () => {
    const provider = new AbortController();
    const execution = new AbortController();
    const registry = new Set<AbortController>();
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

  it("lets go of the provider's signal once disposed: only the execution cancels a later reader", () => {
    const provider = new AbortController();
    const execution = new AbortController();
    const registry = new Set<AbortController>();
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
});
