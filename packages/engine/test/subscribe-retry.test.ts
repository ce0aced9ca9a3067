import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { ProviderError, type QueueProtocol } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { forwarding, type Harness, openHarness } from "./harness.js";

/** The real embedded provider whose `subscribe` fails the next `failures` calls with `error`. */
function flaky(inner: QueueProtocol, plan: { failures: number; error: () => Error }): QueueProtocol {
  return forwarding(inner, {
    async subscribe(destination, handler, options) {
      if (plan.failures > 0) {
        plan.failures--;
        throw plan.error();
      }
      return inner.subscribe(destination, handler, options);
    },
  });
}

const PIPELINE = `
name: subscribe-retry
init: { route: a, message: { n: 1 } }
routes:
  a:
    inbound: { queue: a.in }
    adapters: [{ type: sink }]
`;

describe("routes subscribing while the broker connection drops", () => {
  const plan = { failures: 0, error: () => new Error("unset") };
  let h: Harness;
  beforeAll(async () => {
    h = await openHarness({ queue: flaky(createEmbeddedProvider({ mode: "memory" }), plan) });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("retries a transient subscribe failure with backoff and completes", async () => {
    plan.failures = 2;
    plan.error = () =>
      new ProviderError("test", "connection", "connection lost on purpose", { retryable: true });
    const { status } = await h.run(PIPELINE);
    expect(plan.failures).toBe(0);
    expect(status).toBe("completed");
  });

  it("fails at once on a permanent subscribe failure, saying why", async () => {
    plan.failures = 1;
    plan.error = () =>
      new ProviderError("test", "authorization", "not allowed on purpose", { retryable: false });
    await expect(h.run(PIPELINE)).rejects.toThrow(/not allowed on purpose/);
    expect(plan.failures).toBe(0);
    const { items } = await h.db.executions.listExecutions({ limit: 1 });
    expect(items[0]).toMatchObject({ status: "failed" });
    expect(items[0]?.error).toContain("not allowed on purpose");
  });
});
