import {
  type JsonValue,
  MAX_PREFETCH,
  type OutboundMessage,
  type ProviderCapabilities,
  type QueueProtocol,
  type SubscribeOptions,
} from "@factflow/protocols";
import { resolveSubscribeOptions } from "@factflow/provider-kit";
import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { expectFactflowRejection, publishAll, range } from "./util.js";

/** Above this the suite does not build an oversized message (it would only measure the test machine). */
const LARGEST_ALLOCATION = 256 * 1024 * 1024;

const INVALID_DESTINATIONS = [
  "plain-name",
  "/queue/",
  "/queue/has space",
  "/queue/a//b",
  "/topic/ünïcode",
  "/queue/semi;colon",
  `/queue/${"x".repeat(201)}`,
  "/exchange/amq.direct",
];

function cyclic(): unknown {
  const node: { self?: unknown } = {};
  node.self = node;
  return node;
}

const NON_JSON: [string, () => unknown][] = [
  ["undefined", () => undefined],
  ["a function", () => ({ fn: () => 1 })],
  ["a BigInt", () => ({ big: 10n })],
  ["a cycle", cyclic],
  ["a symbol", () => [Symbol("s")]],
  ["NaN", () => ({ n: Number.NaN })],
  ["a class instance", () => ({ when: new Date(0) })],
];

/** Subscribe options outside the kit's schema: refused the same way by every provider. */
const OUT_OF_SCHEMA: [string, Omit<SubscribeOptions, "subscription">][] = [
  ["concurrency 0", { concurrency: 0 }],
  ["prefetch 0", { prefetch: 0 }],
  [`prefetch ${MAX_PREFETCH + 1} (above the limit)`, { prefetch: MAX_PREFETCH + 1 }],
  ["concurrency above prefetch", { prefetch: 2, concurrency: 4 }],
  ["handlerTimeoutMs 0", { handlerTimeoutMs: 0 }],
  ["maxPriority 11", { maxPriority: 11 }],
  ["retry.maxAttempts 0", { retry: { maxAttempts: 0 } }],
  ['groupBy without ordering: "fifo"', { groupBy: "group" }],
];

/** Options that only some brokers can honour; whoever cannot must refuse them, never ignore them. */
const CAPABILITY_BOUND: [string, keyof ProviderCapabilities, Omit<SubscribeOptions, "subscription">][] = [
  ["groupBy", "messageGroups", { ordering: "fifo", groupBy: "group" }],
  ["maxPriority", "priorities", { maxPriority: 5 }],
  ['ordering: "fifo"', "fifo", { ordering: "fifo" }],
];

/** The kit's verdict on `options` for this provider: its error, or undefined when they are accepted. */
function kitVerdict(
  provider: QueueProtocol,
  destination: string,
  options: SubscribeOptions,
): (Error & { code: string; reason: string }) | undefined {
  try {
    resolveSubscribeOptions(options, provider.capabilities, { provider: provider.name, destination });
    return undefined;
  } catch (error) {
    return error as Error & { code: string; reason: string };
  }
}

export function registerBadInput(env: SuiteEnv): void {
  defineTest(env, "bad-input", {
    title:
      "subscribe options outside the schema are refused with the same code, reason and message on every provider",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("bad-options");
      for (const [label, bad] of OUT_OF_SCHEMA) {
        const options = { subscription: "bad-options", ...bad };
        const expected = kitVerdict(provider, queue, options);
        expect(expected, `the kit refuses ${label}`).toBeDefined();
        const e = await expectFactflowRejection(
          () => provider.subscribe(queue, () => "ACKNOWLEDGED", options),
          `subscribe with ${label}`,
        );
        expect(e.code, `code for ${label}`).toBe("invalid_argument");
        expect((e as { reason?: unknown }).reason, `reason for ${label}`).toBe("invalid-input");
        expect(e.message, `message for ${label}: the kit's words, whatever the broker`).toBe(
          expected?.message,
        );
      }
      const e = await expectFactflowRejection(
        () =>
          provider.subscribe(queue, () => "ACKNOWLEDGED", { subscription: "x", prefetch: MAX_PREFETCH + 1 }),
        "subscribe with a prefetch above the limit",
      );
      expect(e.message, "the message names the option and its limit").toContain(
        `prefetch must be an integer from 1 to ${MAX_PREFETCH}`,
      );
    },
  });

  defineTest(env, "bad-input", {
    title: "options the capabilities cannot honour (groupBy, maxPriority, fifo) are refused, never ignored",
    body: async (h) => {
      const provider = await h.provider();
      for (const [label, capability, bad] of CAPABILITY_BOUND) {
        const queue = h.queue("capability-bound");
        const options = { subscription: "capability-bound", ...bad };
        const expected = kitVerdict(provider, queue, options);
        expect(
          expected === undefined,
          `the kit accepts ${label} exactly when capabilities.${capability} is true`,
        ).toBe(h.caps[capability] === true);
        if (expected === undefined) {
          const subscription = await h.subscribe(provider, queue, () => "ACKNOWLEDGED", options);
          await subscription.unsubscribe();
          continue;
        }
        const e = await expectFactflowRejection(
          () => provider.subscribe(queue, () => "ACKNOWLEDGED", options),
          `subscribe with ${label} while capabilities.${capability} is false`,
        );
        expect(e.code).toBe(expected.code);
        expect((e as { reason?: unknown }).reason).toBe(expected.reason);
        expect(e.message).toBe(expected.message);
      }
    },
  });

  defineTest(env, "bad-input", {
    title: "invalid destination names are refused with a clear error, on publish and subscribe",
    body: async (h) => {
      const provider = await h.provider();
      for (const destination of INVALID_DESTINATIONS) {
        const e = await expectFactflowRejection(
          () => provider.publish(destination, { body: 1 }),
          `publish to "${destination}"`,
        );
        expect(e.message, "the message names the destination").toContain(destination.slice(0, 40));
        await expectFactflowRejection(
          () => provider.subscribe(destination, () => "ACKNOWLEDGED", { subscription: "bad" }),
          `subscribe to "${destination}"`,
        );
      }
    },
  });

  defineTest(env, "bad-input", {
    title:
      "non-JSON bodies, malformed options and oversized messages are refused with a clear error, and nothing queued is lost",
    timeoutMs: 120_000,
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("bad-input");
      const before = await publishAll(
        provider,
        queue,
        range(3).map((n) => ({ n, when: "before" })),
      );
      for (const [label, make] of NON_JSON) {
        const e = await expectFactflowRejection(
          () => provider.publish(queue, { body: make() as JsonValue }),
          `publish with ${label} in the body`,
        );
        expect(["invalid_message", "invalid_argument", "provider_error"], `code for ${label}`).toContain(
          e.code,
        );
      }
      const malformed: [string, OutboundMessage][] = [
        ["priority 12 (allowed 0-9)", { body: 1, priority: 12 }],
        ["priority 1.5", { body: 1, priority: 1.5 }],
        ["a negative delayMs", { body: 1, delayMs: -5 }],
        ["a header that is not a string", { body: 1, headers: { "x-count": 3 as unknown as string } }],
      ];
      for (const [label, message] of malformed) {
        await expectFactflowRejection(() => provider.publish(queue, message), `publish with ${label}`);
      }
      const limit = h.caps.maxMessageBytes;
      if (limit + 1 <= LARGEST_ALLOCATION) {
        const e = await expectFactflowRejection(
          () => provider.publish(queue, { body: "x".repeat(limit + 1) }),
          `publish of ${limit + 1} bytes (limit ${limit})`,
        );
        expect(
          ["message_too_large", "invalid_message", "provider_error"],
          "code for an oversized message",
        ).toContain(e.code);
      } else {
        h.note(
          `bad-input: oversized message not tried: capabilities.maxMessageBytes is ${limit}, above 256 MiB`,
        );
      }
      const after = await publishAll(
        provider,
        queue,
        range(3).map((n) => ({ n, when: "after" })),
      );
      const recorder = collectDeliveries();
      await h.subscribe(provider, queue, recorder.handler, { subscription: "survivor" });
      await recorder.waitForIds([...before, ...after], { timeoutMs: h.timing.deliveryTimeoutMs });
      await h.quiet();
      expect(recorder.deliveries.length, "exactly the valid messages arrive").toBe(6);
      expect(new Set(recorder.ids())).toEqual(new Set([...before, ...after]));
    },
  });
}
