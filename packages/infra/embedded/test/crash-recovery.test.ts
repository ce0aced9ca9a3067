import { fileURLToPath } from "node:url";
import { spawnFixture } from "@factflow/infra-testkit";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createEmbeddedProvider } from "../src/index.js";
import { recordingLogger, tempDir, waitFor } from "./helpers.js";

const packageDir = fileURLToPath(new URL("..", import.meta.url));
const fixture = fileURLToPath(new URL("./fixtures/crash-child.ts", import.meta.url));

let dir: { path: string; remove: () => Promise<void> };
beforeEach(async () => {
  dir = await tempDir();
});
afterEach(async () => {
  await dir.remove();
});

describe("kill -9", () => {
  it.each([
    ["a backlog waiting, no compaction", 67_108_864, "slow"],
    ["the log compacting every 64 KiB", 65_536, "fast"],
  ])(
    "loses no published message and brings back only acks that were not yet durable (%s)",
    async (_label, compactAfterBytes, speed) => {
      const published = new Set<string>();
      const acked = new Set<string>();
      let ready = false;
      let compactions = 0;
      const child = spawnFixture(fixture, [dir.path, String(compactAfterBytes), speed], {
        cwd: packageDir,
        onLine: (line) => {
          if (line === "READY") ready = true;
          else if (line.startsWith("P ")) published.add(line.slice(2));
          else if (line.startsWith("A ")) acked.add(line.slice(2));
          else if (line.startsWith("C ")) compactions = Number(line.slice(2));
        },
      });
      const { proc } = child;
      try {
        await waitFor(() => ready || proc.exitCode !== null, "the child to start", 60_000).catch((e) => {
          throw new Error(`${e}; stderr: ${child.stderr}; lines: ${published.size}`);
        });
        expect(child.stderr).toBe("");
        await waitFor(
          () =>
            published.size >= 3_000 &&
            acked.size >= 1_000 &&
            (compactAfterBytes > 1_000_000 || compactions >= 3),
          "the child to publish, ack (and compact)",
          60_000,
        ).catch((e) => {
          throw new Error(
            `${e}; published ${published.size}, acked ${acked.size}, compactions ${compactions}; stderr: ${child.stderr}`,
          );
        });
      } finally {
        proc.kill("SIGKILL");
      }
      expect(await child.exited, `the child died before the kill; stderr: ${child.stderr}`).toBe("SIGKILL");
      // Lines written before the kill may still be in the pipe.
      await child.drained;

      const logger = recordingLogger();
      const provider = createEmbeddedProvider({ mode: "file", dataDir: dir.path }, { logger });
      await provider.connect();
      const recovered = provider.storeStats();
      const present = new Map<string, number>();
      await provider.subscribe(
        "/queue/crash",
        (d) => {
          present.set(d.message.id, (present.get(d.message.id) ?? 0) + 1);
          return "ACKNOWLEDGED" as const;
        },
        { subscription: "check", concurrency: 16 },
      );
      await waitFor(
        () => provider.counters().acked === recovered.recoveredMessages,
        "every recovered message",
        20_000,
      );
      const stats = await provider.admin.stats({ destination: "/queue/crash" });
      await provider.close();

      const lost = [...published].filter((id) => !acked.has(id) && !present.has(id));
      const ackedButBack = [...present.keys()].filter((id) => acked.has(id));
      const durableUnreported = [...present.keys()].filter((id) => !published.has(id));
      const duplicates = [...present.values()].filter((n) => n > 1).length;
      console.log(
        `[kill -9] published ${published.size}, acked ${acked.size}, recovered ${recovered.recoveredMessages} ` +
          `(${ackedButBack.length} acked in the last uncommitted batch, ${durableUnreported.length} durable before the child printed them), ` +
          `lost ${lost.length}, duplicates ${duplicates}, corrupt tails ${recovered.corruptTails}, child compactions ${compactions}`,
      );
      expect(lost).toEqual([]);
      expect(present.size).toBe(recovered.recoveredMessages);
      expect(duplicates).toBe(0);
      expect(stats).toMatchObject({ depth: 0, dlqDepth: 0, inFlight: 0 });
      // Acks are group-committed every few ms: only the last batches can be missing.
      expect(ackedButBack.length).toBeLessThan(200);
      if (recovered.corruptTails > 0) expect(logger.lines.some((l) => l.level === "warn")).toBe(true);
    },
    180_000,
  );
});
