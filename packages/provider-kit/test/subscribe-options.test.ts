import {
  DEFAULT_HANDLER_TIMEOUT_MS,
  DEFAULT_RETRY_POLICY,
  MAX_HANDLER_TIMEOUT_MS,
  MAX_PREFETCH,
  ProviderError,
  type SubscribeOptions,
} from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { resolveSubscribeOptions, type SubscribeCapabilities } from "../src/index.js";

const ALL: SubscribeCapabilities = { fifo: true, messageGroups: true, priorities: true };
const context = { provider: "kit", destination: "/queue/a" };

function refusal(options: unknown, caps: SubscribeCapabilities = ALL): ProviderError {
  try {
    resolveSubscribeOptions(options as SubscribeOptions, caps, context);
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderError);
    const e = error as ProviderError;
    expect(e.code).toBe("invalid_argument");
    expect(e.reason).toBe("invalid-input");
    expect(e.retryable).toBe(false);
    expect(e.message).toMatch(/^\[factflow\/kit\] subscribe to "\/queue\/a": /);
    return e;
  }
  throw new Error(`expected ${JSON.stringify(options)} to be refused`);
}

describe("resolveSubscribeOptions", () => {
  it("fills every default and freezes the result", () => {
    const resolved = resolveSubscribeOptions({ subscription: "s" }, ALL, context);
    expect(resolved).toEqual({
      subscription: "s",
      prefetch: 10,
      concurrency: 1,
      retry: DEFAULT_RETRY_POLICY,
      ordering: "none",
      deadLetter: true,
      handlerTimeoutMs: DEFAULT_HANDLER_TIMEOUT_MS,
      releasesSignal: false,
      requested: { subscription: "s" },
    });
    expect(DEFAULT_HANDLER_TIMEOUT_MS).toBe(1_800_000);
    expect(Object.isFrozen(resolved)).toBe(true);
    expect(Object.isFrozen(resolved.retry)).toBe(true);
    expect(Object.isFrozen(resolved.requested)).toBe(true);
    expect("groupBy" in resolved, "unset optional fields stay absent").toBe(false);
  });

  it("keeps what the caller set, and reports it apart from the defaults", () => {
    const resolved = resolveSubscribeOptions(
      {
        subscription: "s",
        prefetch: 50,
        concurrency: 8,
        retry: { maxAttempts: 5 },
        ordering: "fifo",
        groupBy: "tenant",
        maxPriority: 10,
        handlerTimeoutMs: 250,
      },
      ALL,
    );
    expect(resolved).toMatchObject({
      prefetch: 50,
      concurrency: 8,
      retry: { ...DEFAULT_RETRY_POLICY, maxAttempts: 5 },
      ordering: "fifo",
      groupBy: "tenant",
      maxPriority: 10,
      handlerTimeoutMs: 250,
    });
    expect(resolved.requested.retry).toEqual({ maxAttempts: 5 });
    expect(resolved.requested.concurrency).toBe(8);
  });

  it("raises the default prefetch to the concurrency, so concurrency alone just works", () => {
    expect(resolveSubscribeOptions({ subscription: "s", concurrency: 16 }, ALL).prefetch).toBe(16);
    expect(resolveSubscribeOptions({ subscription: "s", concurrency: 4 }, ALL).prefetch).toBe(10);
  });

  it("accepts the limits themselves", () => {
    const resolved = resolveSubscribeOptions(
      {
        subscription: "s",
        prefetch: MAX_PREFETCH,
        concurrency: MAX_PREFETCH,
        handlerTimeoutMs: MAX_HANDLER_TIMEOUT_MS,
        maxPriority: 1,
        retry: { maxAttempts: 100, initialDelayMs: 0, multiplier: 10, maxDelayMs: 86_400_000 },
      },
      ALL,
    );
    expect(resolved.prefetch).toBe(10_000);
    expect(resolved.handlerTimeoutMs).toBe(86_400_000);
  });

  it.each([
    [{ prefetch: 0 }, "prefetch must be an integer from 1 to 10000, got 0"],
    [{ prefetch: 10_001 }, "prefetch must be an integer from 1 to 10000, got 10001"],
    [{ prefetch: 2.5 }, "prefetch must be an integer from 1 to 10000, got 2.5"],
    [{ prefetch: "10" }, 'prefetch must be an integer from 1 to 10000, got "10"'],
    [{ concurrency: 0 }, "concurrency must be an integer from 1 to 10000, got 0"],
    [{ prefetch: 2, concurrency: 8 }, "concurrency 8 is above prefetch 2: a handler only runs"],
    [{ handlerTimeoutMs: 0 }, "handlerTimeoutMs must be a number from 1 to 86400000, got 0"],
    [{ handlerTimeoutMs: 86_400_001 }, "handlerTimeoutMs must be a number from 1 to 86400000"],
    [{ maxPriority: 11 }, "maxPriority must be an integer from 1 to 10, got 11"],
    [{ maxPriority: 0 }, "maxPriority must be an integer from 1 to 10, got 0"],
    [{ retry: { maxAttempts: 0 } }, "retry.maxAttempts must be an integer from 1 to 100, got 0"],
    [{ retry: { maxAttempts: 101 } }, "retry.maxAttempts must be an integer from 1 to 100, got 101"],
    [{ retry: { initialDelayMs: -1 } }, "retry.initialDelayMs must be a number from 0 to 3600000, got -1"],
    [{ retry: { multiplier: 0.5 } }, "retry.multiplier must be a number from 1 to 10, got 0.5"],
    [{ retry: { maxDelayMs: 1e9 } }, "retry.maxDelayMs must be a number from 0 to 86400000"],
    [{ retry: 3 }, "retry must be an object like { maxAttempts: 5 }, got 3"],
    [{ ordering: "random" }, 'ordering must be "none" or "fifo", got "random"'],
    [{ groupBy: "" }, 'groupBy must be a non-empty string of at most 200 characters, got ""'],
    [{ groupBy: "k" }, 'groupBy "k" needs ordering: "fifo"'],
    [{ subscription: "" }, "options.subscription must be a non-empty string"],
    [{ subscription: undefined }, "options.subscription must be a non-empty string"],
  ])("refuses %j naming the option, its limit and the fix", (bad, text) => {
    const error = refusal({ subscription: "s", ...bad });
    expect(error.message).toContain(text);
  });

  it("refuses options that are not an object", () => {
    expect(refusal(undefined).message).toContain('subscribe needs options like { subscription: "<name>" }');
    expect(refusal(null).message).toContain("got null");
  });

  it("reports every problem at once", () => {
    const error = refusal({ subscription: "s", prefetch: 0, maxPriority: 11, retry: { maxAttempts: 0 } });
    expect(error.message).toContain("prefetch must be");
    expect(error.message).toContain("maxPriority must be");
    expect(error.message).toContain("retry.maxAttempts must be");
  });

  it("refuses what the capabilities cannot honour instead of ignoring it", () => {
    const none: SubscribeCapabilities = { fifo: false, messageGroups: false, priorities: false };
    expect(
      refusal({ subscription: "s", ordering: "fifo", groupBy: "k" }, { ...ALL, messageGroups: false })
        .message,
    ).toContain("groupBy is not supported by this provider (capabilities.messageGroups is false)");
    expect(refusal({ subscription: "s", maxPriority: 5 }, none).message).toContain(
      "maxPriority is not supported by this provider (capabilities.priorities is false)",
    );
    expect(refusal({ subscription: "s", ordering: "fifo" }, none).message).toContain(
      'ordering: "fifo" is not supported by this provider (capabilities.fifo is false)',
    );
    expect(resolveSubscribeOptions({ subscription: "s", ordering: "none" }, none).ordering).toBe("none");
  });

  it("gives the same error text for the same options, whichever provider asks", () => {
    const bad = { subscription: "s", concurrency: 0 } as SubscribeOptions;
    const text = (provider: string) => {
      try {
        resolveSubscribeOptions(bad, ALL, { provider, destination: "/queue/a" });
      } catch (error) {
        return (error as Error).message.replace(/^\[factflow\/[^\]]+\] /, "");
      }
      return "";
    };
    expect(text("rabbitmq")).toBe(text("artemis"));
    expect(text("embedded")).toBe(text("artemis"));
  });
});
