import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { collectDeliveries, probeTcp, waitFor } from "@factflow/infra-testkit";
import { afterAll, describe, expect, it } from "vitest";
import { createRedisProvider, type RedisProvider } from "../src/index.js";
import { deleteKeysWithPrefix, REDIS_HOST, REDIS_PORT, REDIS_URL, testPrefix } from "./helpers.js";

const packageDir = fileURLToPath(new URL("..", import.meta.url));
const child = fileURLToPath(new URL("./fixtures/consumer-child.ts", import.meta.url));
const available = await probeTcp(REDIS_HOST, REDIS_PORT);
const required = process.env.FACTFLOW_REQUIRE_SERVICES === "1";
const keyPrefix = testPrefix();
const VISIBILITY_MS = 1_500;
const MESSAGES = 5;

afterAll(async () => {
  if (available.ok) await deleteKeysWithPrefix(keyPrefix);
});

describe.skipIf(!available.ok && !required)(
  `a consumer killed with SIGKILL${available.ok ? "" : ` (Redis not reachable: ${available.reason})`}`,
  () => {
    it("leaves pending entries that another consumer reclaims after the visibility timeout", async () => {
      const queue = "/queue/kill/work";
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
          String(VISIBILITY_MS),
          "10",
        ],
        { cwd: packageDir, stdio: ["ignore", "pipe", "pipe"] },
      );
      const got = new Set<string>();
      let ready = false;
      let stderr = "";
      let rest = "";
      proc.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      proc.stdout.on("data", (chunk: Buffer) => {
        const lines = (rest + chunk.toString()).split("\n");
        rest = lines.pop() ?? "";
        for (const line of lines) {
          if (line === "READY") ready = true;
          else if (line.startsWith("GOT ")) got.add(line.slice(4));
        }
      });
      const exited = new Promise<NodeJS.Signals | null>((resolve) =>
        proc.on("exit", (_code, signal) => resolve(signal)),
      );
      const provider: RedisProvider = createRedisProvider({
        url: REDIS_URL,
        keyPrefix,
        visibilityTimeoutMs: VISIBILITY_MS,
      });
      await provider.connect();
      try {
        await waitFor(() => ready || proc.exitCode !== null, {
          timeoutMs: 60_000,
          description: () => `the child consumer to subscribe (stderr: ${stderr})`,
        });
        expect(proc.exitCode, `the child exited early: ${stderr}`).toBeNull();
        const ids: string[] = [];
        for (let n = 0; n < MESSAGES; n++) ids.push((await provider.publish(queue, { body: { n } })).id);
        await waitFor(() => ids.every((id) => got.has(id)), {
          timeoutMs: 30_000,
          description: () => `the child to take all ${MESSAGES} messages (has ${got.size})`,
        });
        const held = await provider.admin.stats({ destination: queue });
        expect(held).toMatchObject({ depth: 0, inFlight: MESSAGES, consumers: 1 });

        proc.kill("SIGKILL");
        expect(await exited).toBe("SIGKILL");

        const survivor = collectDeliveries();
        await provider.subscribe(queue, survivor.handler, { subscription: "survivor", prefetch: 10 });
        await survivor.waitForIds(ids, { status: "ACKNOWLEDGED", timeoutMs: 30_000 });
        expect(
          survivor.deliveries.every((d) => d.redelivered),
          "reclaimed deliveries are flagged redelivered",
        ).toBe(true);
        expect(survivor.duplicates()).toEqual(new Map());
        // The handler's answer is seen before its XACK completes (acks go out in batches): wait for
        // the acks to be counted, then check the counts exactly.
        await waitFor(() => provider.counters().acked >= MESSAGES, {
          timeoutMs: 30_000,
          description: () =>
            `the survivor's ${MESSAGES} acks (counters ${JSON.stringify(provider.counters())})`,
        });
        expect(provider.counters()).toMatchObject({ acked: MESSAGES, redelivered: MESSAGES, lost: 0 });
        // The dead consumer stops counting once its heartbeat is stale, and is removed from the group.
        await waitFor(
          async () => {
            const s = await provider.admin.stats({ destination: queue });
            return s.depth === 0 && s.inFlight === 0 && s.consumers === 1 && s.dlqDepth === 0;
          },
          { timeoutMs: 30_000, description: "an empty queue with one live consumer" },
        );
      } finally {
        proc.kill("SIGKILL");
        await provider.close();
      }
    }, 120_000);
  },
);
