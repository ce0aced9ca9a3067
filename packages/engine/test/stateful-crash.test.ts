import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { adapters as builtins } from "@factflow/adapters";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { openLineageDatabase } from "@factflow/lineage";
import { describe, expect, it } from "vitest";
import { createEngine } from "../src/index.js";
import { blocks, memoryStorage, seen, tempDir, testAdapters, waitFor } from "./harness.js";

const packageDir = fileURLToPath(new URL("..", import.meta.url));
const child = fileURLToPath(new URL("./fixtures/stateful-crash-child.ts", import.meta.url));

const items = ["a", "b", "c", "d", "e"];

// The batch is larger than the items and its timer far away; the blocked `slow` route keeps the
// execution from draining, so in the child nothing can emit the batch before the kill.
const config = `
name: fan-in-crash
init: { route: split, message: { items: [${items.join(", ")}] } }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [collect.in, slow.in]
  collect:
    inbound: { queue: collect.in }
    adapters:
      - type: batch
        config: { size: 50, timeout_ms: 600000 }
      - type: sink
  slow:
    inbound: { queue: slow.in, concurrency: 5 }
    adapters: [{ type: block }]
`;

describe("stateful (fan-in) adapters under kill -9", () => {
  it("re-emits every held item exactly once after the process dies and the execution resumes", async () => {
    const dir = tempDir();
    try {
      const proc = spawn(
        process.execPath,
        ["--conditions=factflow-source", "--import", "tsx", child, dir, config, String(items.length)],
        { cwd: packageDir, stdio: ["ignore", "pipe", "pipe"] },
      );
      let executionId: string | undefined;
      let stderr = "";
      let rest = "";
      proc.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      proc.stdout.on("data", (chunk: Buffer) => {
        const lines = (rest + chunk.toString()).split("\n");
        rest = lines.pop() ?? "";
        for (const line of lines) if (line.startsWith("HELD ")) executionId = line.slice(5);
      });
      const drained = new Promise((resolve) => proc.stdout.on("close", resolve));
      const exited = new Promise<NodeJS.Signals | null>((resolve) =>
        proc.on("exit", (_code, signal) => resolve(signal)),
      );
      try {
        await waitFor(
          () => executionId !== undefined || proc.exitCode !== null,
          "the child to hold every item",
          150_000,
        ).catch((e) => {
          throw new Error(`${e}; stderr: ${stderr}`);
        });
      } finally {
        proc.kill("SIGKILL");
      }
      expect(await exited, `the child died before the kill; stderr: ${stderr}`).toBe("SIGKILL");
      await drained;
      const id = executionId;
      if (id === undefined) throw new Error(`the child never reported its execution; stderr: ${stderr}`);

      // A new process over the same data directory: the held deliveries come back from the log.
      blocks.released = true;
      const db = await openLineageDatabase({ dataDir: join(dir, "db") });
      const queue = createEmbeddedProvider({ mode: "file", dataDir: join(dir, "queue") });
      await queue.connect();
      const engine = createEngine({
        queue,
        lineage: db.lineage,
        executions: db.executions,
        storage: memoryStorage(),
        adapters: [...builtins, ...testAdapters],
      });
      try {
        expect((await engine.service.get(id)).status).toBe("running");
        await engine.service.resume(id);
        const end = await engine.service.waitForEnd(id, 60_000);
        if (end !== "completed") {
          // Say what kept it open: route counters and the rows still open.
          const open = (await db.lineage.rows(id, { limit: 1000 })).items
            .filter((r) => r.status === "pending" || r.status === "processing")
            .map((r) => `${r.kind} ${r.route} ${r.status} attempt ${r.attempt}`);
          const counters = JSON.stringify(engine.manager.get(id)?.counters());
          expect.fail(`execution is ${end}; counters ${counters}; open rows: ${open.join(", ")}`);
        }
        const batches = (seen.get(id) ?? []).filter((s) => s.route === "collect");
        const emitted = batches.flatMap((s) =>
          (s.body as { items: { item: string }[] }).items.map((i) => i.item),
        );
        expect(emitted.sort()).toEqual(items);
        expect(batches).toHaveLength(1);
        expect(await db.lineage.countOpen(id)).toBe(0);
        // The blocked invocations the child died in were closed by the resume, not left open.
        const abandoned = await db.lineage.rows(id, { kind: "adapter", status: "abandoned", route: "slow" });
        expect(abandoned.items.map((r) => r.error?.class)).toEqual(
          Array(items.length).fill("DeliveryAbandoned"),
        );
      } finally {
        await engine.shutdown();
        await queue.close();
        await db.close();
      }
    } finally {
      blocks.released = false;
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});
