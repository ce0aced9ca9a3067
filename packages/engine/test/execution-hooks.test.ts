import { adapters } from "@factflow/adapters";
import type { ExecutionRecord, Logger, QueueProtocol } from "@factflow/protocols";
import { silentLogger } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, type ExecutionHooks, loadPipelineConfig, scopedDestination } from "../src/index.js";
import { blocks, type Harness, memoryStorage, openHarness, testAdapters, waitFor } from "./harness.js";

// The lifecycle hooks against the real embedded provider and PGlite: when each is called, with what,
// and that a hook that throws never changes the execution.
const CONFIG = `
name: hooks
init: { route: first, message: { n: 1 } }
routes:
  first:
    inbound: { queue: hooks.first }
    adapters: [{ type: passthrough }]
    outbound: [hooks.second]
  second:
    inbound: { queue: hooks.second }
    adapters: [{ type: sink }]
`;

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  blocks.released = true;
  await h?.close();
});

/** The shared provider, recording every subscribe and publish in `timeline`. */
function recording(queue: QueueProtocol, timeline: string[]): QueueProtocol {
  return {
    name: queue.name,
    capabilities: queue.capabilities,
    admin: queue.admin,
    connect: () => queue.connect(),
    close: () => queue.close(),
    counters: () => queue.counters(),
    publish(destination, message) {
      timeline.push(`publish ${destination}`);
      return queue.publish(destination, message);
    },
    subscribe(destination, handler, options) {
      timeline.push(`subscribe ${destination}`);
      return queue.subscribe(destination, handler, options);
    },
  };
}

function engineWith(hooks: ExecutionHooks, timeline: string[] = [], logger: Logger = silentLogger) {
  return createEngine({
    queue: recording(h.queue, timeline),
    lineage: h.db.lineage,
    executions: h.db.executions,
    storage: memoryStorage(),
    adapters: [
      ...adapters,
      ...testAdapters,
      {
        type: "broken",
        description: "cannot be created",
        create: () => {
          throw new Error("broken adapter");
        },
      },
    ],
    logger,
    hooks,
  });
}

describe("execution lifecycle hooks", () => {
  it("announce an execution before its first subscribe or publish, and its end once its subscriptions are stopped", async () => {
    const timeline: string[] = [];
    const ended: { record: ExecutionRecord; end: string; consumers: number; status: string }[] = [];
    const engine = engineWith(
      {
        onExecutionStarted: (record) => {
          timeline.push(`started ${record.id} ${record.status}`);
        },
        onExecutionEnded: async (record, end) => {
          const inbound = scopedDestination(record.id, "hooks.second");
          ended.push({
            record,
            end,
            consumers: (await h.queue.admin.stats({ destination: inbound })).consumers,
            status: (await h.db.executions.getExecution(record.id))?.status ?? "missing",
          });
        },
      },
      timeline,
    );
    const config = await loadPipelineConfig(CONFIG, { registry: engine.registry });
    const record = await engine.service.create({ config });
    expect(timeline[0]).toBe(`started ${record.id} running`);
    expect(timeline.slice(1, 3).sort()).toEqual(
      [scopedDestination(record.id, "hooks.first"), scopedDestination(record.id, "hooks.second")]
        .map((d) => `subscribe ${d}`)
        .sort(),
    );
    expect(timeline[3]).toBe(`publish ${scopedDestination(record.id, "hooks.first")}`);

    expect(await engine.service.waitForEnd(record.id, 60_000)).toBe("completed");
    await waitFor(() => ended.length === 1, "onExecutionEnded");
    expect(ended[0]).toMatchObject({ end: "completed", consumers: 0, status: "completed" });
    expect(ended[0]?.record.id).toBe(record.id);

    // A replay is a new execution, announced the same way.
    const replay = await engine.service.replay(record.id, { fromRoute: "second" });
    expect(timeline).toContain(`started ${replay.id} running`);
    expect(await engine.service.waitForEnd(replay.id, 60_000)).toBe("completed");
    await waitFor(() => ended.length === 2, "onExecutionEnded of the replay");
    expect(ended[1]).toMatchObject({
      end: "completed",
      record: { id: replay.id, parentExecutionId: record.id },
    });
    await engine.shutdown();
  });

  it("pair up for an execution that fails to start, and never for a start refused before it runs", async () => {
    const calls: string[] = [];
    const engine = engineWith({
      onExecutionStarted: (record) => {
        calls.push(`started ${record.id}`);
      },
      onExecutionEnded: (record, end) => {
        calls.push(`ended ${record.id} ${end}`);
      },
    });
    const config = await loadPipelineConfig(
      "name: broken\ninit: { route: r }\nroutes:\n  r:\n    inbound: { queue: broken.in }\n    adapters: [{ type: broken }]\n",
      { registry: engine.registry },
    );
    await expect(engine.service.create({ config })).rejects.toThrow(/broken adapter/);
    const [failed] = (await h.db.executions.listExecutions({ configName: "broken" })).items;
    expect(failed?.status).toBe("failed");
    await waitFor(() => calls.length === 2, "onExecutionEnded");
    expect(calls).toEqual([`started ${failed?.id}`, `ended ${failed?.id} failed`]);

    await engine.shutdown();
    const before = calls.length;
    await expect(engine.service.create({ config })).rejects.toMatchObject({ code: "cancelled" });
    expect(calls).toHaveLength(before);
  });

  it("report `stopped` on shutdown (which waits for the hook), and announce a resumed execution again", async () => {
    blocks.released = false;
    const calls: string[] = [];
    const hooks: ExecutionHooks = {
      onExecutionStarted: (record) => {
        calls.push(`started ${record.id}`);
      },
      onExecutionEnded: async (record, end) => {
        await new Promise((resolve) => setTimeout(resolve, 20));
        calls.push(`ended ${record.id} ${end}`);
      },
    };
    const first = engineWith(hooks);
    const config = await loadPipelineConfig(
      "name: hooks-resume\ninit: { route: r }\nroutes:\n  r:\n    inbound: { queue: r.in }\n    adapters: [{ type: block }]\n",
      { registry: first.registry },
    );
    const record = await first.service.create({ config });
    await first.shutdown();
    expect(calls).toEqual([`started ${record.id}`, `ended ${record.id} stopped`]);
    expect((await first.service.get(record.id)).status).toBe("running");

    const second = engineWith(hooks);
    await second.service.resume(record.id);
    expect(calls[2]).toBe(`started ${record.id}`);
    blocks.released = true;
    expect(await second.service.waitForEnd(record.id, 60_000)).toBe("completed");
    await waitFor(() => calls.length === 4, "onExecutionEnded after resume");
    expect(calls[3]).toBe(`ended ${record.id} completed`);
    await second.shutdown();
  });

  it("that throw are logged and never break the execution", async () => {
    const errors: string[] = [];
    const logger: Logger = { ...silentLogger, error: (message) => void errors.push(message) };
    const engine = engineWith(
      {
        onExecutionStarted: () => {
          throw new Error("started hook broke");
        },
        onExecutionEnded: () => Promise.reject(new Error("ended hook broke")),
      },
      [],
      logger,
    );
    const config = await loadPipelineConfig(CONFIG, { registry: engine.registry });
    const record = await engine.service.create({ config });
    expect(await engine.service.waitForEnd(record.id, 60_000)).toBe("completed");
    await waitFor(() => errors.length === 2, "both hook failures logged");
    expect(errors).toEqual([
      "execution hook onExecutionStarted failed",
      "execution hook onExecutionEnded failed",
    ]);
    await engine.shutdown();
  });
});
