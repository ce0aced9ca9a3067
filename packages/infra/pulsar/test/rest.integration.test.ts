import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { PulsarRest } from "../src/rest.js";
import { PULSAR_URL, pulsarAvailability } from "./helpers.js";

// Pulsar's admin REST answers 412 "Subscription Busy" while it cannot fence a subscription's
// consumers: several servers of a cluster creating the same subscription at once, or a delete while
// consumers of a killed process still count as connected. Such changes are retried for a while.

const BUSY = JSON.stringify({ reason: "Failed for Subscription Busy: Failed to fence subscription" });

/** An admin API stand-in answering `busyTimes` 412s, then 204; counts the calls. */
async function busyAdmin(
  busyTimes: number,
  reason = BUSY,
): Promise<{ url: string; calls: () => number; server: Server }> {
  let calls = 0;
  const server = createServer((request, response) => {
    request.resume();
    calls++;
    if (calls <= busyTimes) {
      response.writeHead(412, { "content-type": "application/json" }).end(reason);
      return;
    }
    response.writeHead(204).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, calls: () => calls, server };
}

const servers: Server[] = [];
afterAll(() => {
  for (const server of servers) server.close();
});

function rest(adminUrl: string, busyRetryMs?: number): PulsarRest {
  return new PulsarRest({
    adminUrl,
    tenant: "public",
    namespace: "default",
    timeoutMs: 5000,
    ...(busyRetryMs === undefined ? {} : { busyRetryMs }),
  });
}

describe("PulsarRest: 412 Subscription Busy", () => {
  it("retries a busy subscription change until the broker takes it", async () => {
    const admin = await busyAdmin(3);
    servers.push(admin.server);
    await rest(admin.url).createSubscription("t", "factflow", "earliest");
    expect(admin.calls()).toBe(4);
    const deletes = await busyAdmin(2);
    servers.push(deletes.server);
    expect(await rest(deletes.url).deleteSubscription("t", "factflow")).toBe(true);
    expect(deletes.calls()).toBe(3);
  });

  it("gives up after the bounded time and reports the 412", async () => {
    const admin = await busyAdmin(Number.POSITIVE_INFINITY);
    servers.push(admin.server);
    await expect(rest(admin.url, 300).createSubscription("t", "factflow", "earliest")).rejects.toThrow(
      /412.*Subscription Busy/,
    );
    expect(admin.calls()).toBeGreaterThan(1);
  });

  it("does not retry a 412 of another kind", async () => {
    const admin = await busyAdmin(1, JSON.stringify({ reason: "Precondition failed" }));
    servers.push(admin.server);
    await expect(rest(admin.url).deleteTopic("t")).rejects.toThrow(/412/);
    expect(admin.calls()).toBe(1);
  });
});

const available = await pulsarAvailability();

describe.skipIf(!available.ok)("PulsarRest on the broker", () => {
  it("many processes creating one queue subscription at once all succeed", async () => {
    const adminUrl = PULSAR_URL.replace(/^ws/, "http");
    const topic = `q.rest-busy-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    const clients = Array.from({ length: 6 }, () => rest(adminUrl));
    try {
      await Promise.all(clients.map((c) => c.createSubscription(topic, "factflow", "earliest")));
      expect([...((await clients[0]?.subscriptions(topic)) ?? new Map()).keys()]).toContain("factflow");
    } finally {
      await clients[0]?.deleteTopic(topic).catch(() => false);
    }
  });
});
