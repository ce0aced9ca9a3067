import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { collectDeliveries, probeTcp, waitFor } from "@factflow/infra-testkit";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { createRedisProvider, laneFor, type RedisProvider } from "../src/index.js";
import { deleteKeysWithPrefix, REDIS_HOST, REDIS_PORT, REDIS_URL, testPrefix } from "./helpers.js";

// A cluster server taking over a dead one calls `claimFromNode`: the dead node's pending entries
// move at once, not after the visibility timeout (an hour here, so nothing else can move them).

const packageDir = fileURLToPath(new URL("..", import.meta.url));
const child = fileURLToPath(new URL("./fixtures/consumer-child.ts", import.meta.url));
const available = await probeTcp(REDIS_HOST, REDIS_PORT);
const required = process.env.FACTFLOW_REQUIRE_SERVICES === "1";
const keyPrefix = testPrefix();
const HOUR_MS = 3_600_000;
const MESSAGES = 10;
const DEAD_NODE = "dead-node";

afterAll(async () => {
  if (available.ok) await deleteKeysWithPrefix(keyPrefix);
});

/** Starts the child consumer; resolves once it has subscribed, with the ids it reports taking. */
function startChild(queue: string) {
  const proc = spawn(
    process.execPath,
    [
      "--conditions=factflow-source",
      "--import",
      "tsx",
      child,
      REDIS_URL,
      keyPrefix,
      queue,
      String(HOUR_MS),
      String(MESSAGES),
      DEAD_NODE,
    ],
    { cwd: packageDir, stdio: ["ignore", "pipe", "pipe"] },
  );
  const got = new Set<string>();
  const state = { ready: false, stderr: "" };
  let rest = "";
  proc.stderr.on("data", (chunk: Buffer) => {
    state.stderr += chunk.toString();
  });
  proc.stdout.on("data", (chunk: Buffer) => {
    const lines = (rest + chunk.toString()).split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) {
      if (line === "READY") state.ready = true;
      else if (line.startsWith("GOT ")) got.add(line.slice(4));
    }
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    proc.on("exit", (_code, signal) => resolve(signal)),
  );
  return { proc, got, state, exited };
}

/** The consumer names of a queue's group, read from Redis. */
async function groupConsumers(queue: string): Promise<string[]> {
  const redis = new Redis(REDIS_URL);
  try {
    const list = (await redis.xinfo(
      "CONSUMERS",
      laneFor(keyPrefix, queue).stream,
      "factflow",
    )) as unknown[][];
    return list.map((fields) => String(fields[fields.indexOf("name") + 1]));
  } finally {
    redis.disconnect();
  }
}

describe.skipIf(!available.ok && !required)(
  `claimFromNode after a consumer was killed with SIGKILL${available.ok ? "" : ` (Redis not reachable: ${available.reason})`}`,
  () => {
    it("hands the dead node's pending entries to a live consumer at once, beyond one prefetch", async () => {
      const queue = "/queue/claim/work";
      const doomed = startChild(queue);
      // Small prefetch: the survivor cannot take all of them in one claim; its reclaim passes
      // (every 200 ms) take the rest while the dead node stays marked.
      const provider: RedisProvider = createRedisProvider(
        { url: REDIS_URL, keyPrefix, visibilityTimeoutMs: HOUR_MS, reclaimIntervalMs: 200 },
        { node: "live-node" },
      );
      await provider.connect();
      try {
        await waitFor(() => doomed.state.ready || doomed.proc.exitCode !== null, {
          timeoutMs: 60_000,
          description: () => `the child consumer to subscribe (stderr: ${doomed.state.stderr})`,
        });
        expect(doomed.proc.exitCode, `the child exited early: ${doomed.state.stderr}`).toBeNull();
        const ids: string[] = [];
        for (let n = 0; n < MESSAGES; n++) ids.push((await provider.publish(queue, { body: { n } })).id);
        await waitFor(() => ids.every((id) => doomed.got.has(id)), {
          timeoutMs: 30_000,
          description: () => `the child to take all ${MESSAGES} messages (has ${doomed.got.size})`,
        });
        doomed.proc.kill("SIGKILL");
        expect(await doomed.exited).toBe("SIGKILL");

        const survivor = collectDeliveries();
        await provider.subscribe(queue, survivor.handler, { subscription: "survivor", prefetch: 4 });
        // A live node's own consumers are never claimed, and an unknown node claims nothing.
        await provider.claimFromNode("live-node");
        await provider.claimFromNode("some-other-node");
        expect(survivor.deliveries).toEqual([]);

        await provider.claimFromNode(DEAD_NODE);
        await survivor.waitForIds(ids, { status: "ACKNOWLEDGED", timeoutMs: 30_000 });
        expect(
          survivor.deliveries.every((d) => d.redelivered),
          "claimed deliveries are redelivered",
        ).toBe(true);
        expect(survivor.duplicates()).toEqual(new Map());
        await waitFor(() => provider.counters().acked >= MESSAGES, {
          timeoutMs: 30_000,
          description: () =>
            `the survivor's ${MESSAGES} acks (counters ${JSON.stringify(provider.counters())})`,
        });
        expect(provider.counters()).toMatchObject({ acked: MESSAGES, redelivered: MESSAGES, lost: 0 });
        // Emptied, the dead node's consumer is removed from the group; the live one stays.
        let names: string[] = [];
        await waitFor(
          async () => {
            names = await groupConsumers(queue);
            return names.every((name) => name.startsWith("live-node/"));
          },
          { timeoutMs: 30_000, description: () => `only live-node consumers in the group (${names})` },
        );
      } finally {
        doomed.proc.kill("SIGKILL");
        await provider.close();
      }
    }, 120_000);
  },
);
