import type { JsonValue, OutboundMessage } from "@factflow/protocols";
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

export function registerBadInput(env: SuiteEnv): void {
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
