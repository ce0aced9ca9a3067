import { adapters } from "@factflow/adapters";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { openLineageDatabase } from "@factflow/lineage";
import { type ExecutionStoreProtocol, FactflowError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { createEngine, loadPipelineConfig } from "../src/index.js";
import { memoryStorage } from "./harness.js";

// A wait (`events`, `waitForEnd`) reads the execution row first. A database connection lost under
// that read is a retryable store error: the wait retries it instead of failing the caller, while
// an error the store does not call retryable still ends the wait at once.

const CHAIN = `
name: wait-through
init: { route: a, message: { n: 1 } }
routes:
  a: { inbound: { queue: w.a }, adapters: [{ type: passthrough }], outbound: [w.b] }
  b: { inbound: { queue: w.b }, adapters: [{ type: passthrough }] }
`;

/** `store`, whose next `failures` reads of an execution throw `error`. */
function failingReads(store: ExecutionStoreProtocol, failures: { left: number; error: Error; seen: number }) {
  return new Proxy(store, {
    get(target, property, receiver) {
      if (property !== "getExecution") {
        const value = Reflect.get(target, property, receiver);
        // The store keeps private fields: its methods run on the store itself, not on the proxy.
        return typeof value === "function" ? value.bind(target) : value;
      }
      return async (id: string) => {
        if (failures.left > 0) {
          failures.left--;
          failures.seen++;
          throw failures.error;
        }
        return target.getExecution(id);
      };
    },
  });
}

async function openEngine(failures: { left: number; error: Error; seen: number }) {
  const db = await openLineageDatabase({ memory: true });
  const queue = createEmbeddedProvider({ mode: "memory" });
  await queue.connect();
  const engine = createEngine({
    queue,
    lineage: db.lineage,
    executions: failingReads(db.executions, failures),
    storage: memoryStorage(),
    adapters,
  });
  return {
    engine,
    async close() {
      await engine.shutdown();
      await queue.close();
      await db.close();
    },
  };
}

describe("waiting for an execution through store errors", () => {
  it("retries a read the store marks retryable and resolves with the final status", async () => {
    const lost = new FactflowError("lineage_error", "lost the connection to PostgreSQL", { retryable: true });
    const failures = { left: 0, error: lost as Error, seen: 0 };
    const { engine, close } = await openEngine(failures);
    const config = await loadPipelineConfig(CHAIN, { registry: engine.registry });
    const record = await engine.service.create({ config });
    failures.left = 3;
    expect(await engine.service.waitForEnd(record.id, 60_000)).toBe("completed");
    expect(failures.seen).toBe(3);
    await close();
  });

  it("ends the wait at once on an error that is not retryable", async () => {
    const broken = new FactflowError("lineage_error", "relation does not exist", { retryable: false });
    const failures = { left: 0, error: broken as Error, seen: 0 };
    const { engine, close } = await openEngine(failures);
    const config = await loadPipelineConfig(CHAIN, { registry: engine.registry });
    const record = await engine.service.create({ config });
    failures.left = 1;
    await expect(engine.service.waitForEnd(record.id, 60_000)).rejects.toBe(broken);
    expect(failures.seen).toBe(1);
    await engine.service.waitForEnd(record.id, 60_000);
    await close();
  });
});
