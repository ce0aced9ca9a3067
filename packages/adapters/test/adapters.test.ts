import { createHash } from "node:crypto";
import {
  type AdapterResult,
  type ArtefactSidecar,
  isStatefulAdapter,
  type JsonObject,
  type JsonValue,
  type PipelineContext,
  type StatefulAdapter,
  type StorageProtocol,
  silentLogger,
} from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { adapters, batchAdapter, filterAdapter } from "../src/index.js";

/** A plain in-memory StorageProtocol, enough to observe what write_artefact stores. */
function memoryStorage(): StorageProtocol & {
  files: Map<string, { data: Uint8Array; sidecar: ArtefactSidecar }>;
} {
  const files = new Map<string, { data: Uint8Array; sidecar: ArtefactSidecar }>();
  return {
    files,
    async put(key, data, options = {}) {
      const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
      const sidecar: ArtefactSidecar = {
        key,
        contentType: options.contentType ?? "application/octet-stream",
        size: bytes.length,
        sha256: createHash("sha256").update(bytes).digest("hex"),
        createdAt: new Date().toISOString(),
        ...(options.lineageId === undefined ? {} : { lineageId: options.lineageId }),
      };
      files.set(key, { data: bytes, sidecar });
      return sidecar;
    },
    async get(key) {
      return files.get(key);
    },
    async head(key) {
      return files.get(key)?.sidecar;
    },
    async list() {
      return [...files.values()].map((f) => f.sidecar);
    },
    async delete(key) {
      return files.delete(key);
    },
    describe: () => "memory",
  };
}

const storage = memoryStorage();

function ctx(message: JsonValue, extra: Partial<PipelineContext> = {}): PipelineContext {
  return {
    message,
    envelope: {
      id: "m1",
      body: message,
      headers: {},
      correlationId: "c1",
      publishedAt: new Date().toISOString(),
    },
    executionId: "e1",
    route: "r",
    adapterIndex: 0,
    correlationId: "c1",
    messageId: "m1",
    attempt: 1,
    lineageId: "l1",
    storage,
    logger: silentLogger,
    signal: new AbortController().signal,
    ...extra,
  };
}

async function make(type: string, config: JsonObject) {
  const definition = adapters.find((a) => a.type === type);
  if (definition === undefined) throw new Error(`no ${type}`);
  expect(definition.validateConfig?.(config)).toEqual([]);
  return definition.create(config, { logger: silentLogger, executionId: "e1", route: "r" });
}

describe("built-in adapters", () => {
  it("exposes each built-in once, with a description", () => {
    const types = adapters.map((a) => a.type);
    expect(new Set(types).size).toBe(types.length);
    expect(types).toEqual(
      expect.arrayContaining([
        "passthrough",
        "log",
        "json_transform",
        "split",
        "batch",
        "write_artefact",
        "filter",
        "delay",
        "fail",
      ]),
    );
    for (const a of adapters) expect(a.description.length).toBeGreaterThan(10);
  });

  it("validates configs and names the bad field", () => {
    expect(batchAdapter.validateConfig?.({ size: 0 })[0]).toMatch(/batch: size:/);
    expect(filterAdapter.validateConfig?.({ field: "x" })[0]).toMatch(/one of equals/);
    expect(adapters.find((a) => a.type === "passthrough")?.validateConfig?.({ extra: 1 })).toHaveLength(1);
  });

  it("json_transform picks, omits, renames and sets", async () => {
    const adapter = await make("json_transform", {
      pick: ["a", "b.c", "d"],
      rename: { a: "x" },
      set: { v: 2 },
    });
    const result = (await adapter.process(ctx({ a: 1, b: { c: 3 }, d: 4, e: 5 }))) as AdapterResult;
    expect(result.data).toEqual({ x: 1, c: 3, d: 4, v: 2 });
  });

  it("split fans out one message per item and ends the chain", async () => {
    const adapter = await make("split", { field: "items", as: "item", include: ["job"] });
    const result = (await adapter.process(ctx({ job: "j", items: ["a", "b"] }))) as AdapterResult;
    expect(result.data).toBeNull();
    expect(result.emitMessages?.map((m) => m.body)).toEqual([
      { item: "a", index: 0, job: "j" },
      { item: "b", index: 1, job: "j" },
    ]);
    const bad = (await adapter.process(ctx({ items: 3 }))) as AdapterResult;
    expect(bad.retryable).toBe(false);
  });

  it("batch emits when full, flushes the rest, and counts a redelivered message once", async () => {
    const adapter = (await make("batch", { size: 3, timeout_ms: 1000 })) as StatefulAdapter;
    expect(isStatefulAdapter(adapter)).toBe(true);
    expect(adapter.capacity).toBe(3);
    expect(adapter.flushIntervalMs).toBe(1000);
    expect((await adapter.process(ctx(1, { messageId: "a" }))).data).toBeNull();
    expect((await adapter.process(ctx(1, { messageId: "a" }))).data).toBeNull();
    expect((await adapter.process(ctx(2, { messageId: "b" }))).data).toBeNull();
    expect((await adapter.process(ctx(3, { messageId: "c" }))).data).toEqual({ items: [1, 2, 3], count: 3 });
    await adapter.process(ctx(4, { messageId: "d" }));
    const flushContext = {
      executionId: "e1",
      route: "r",
      storage,
      logger: silentLogger,
      signal: new AbortController().signal,
    };
    expect((await adapter.flush(flushContext))?.data).toEqual({ items: [4], count: 1 });
    expect(await adapter.flush(flushContext)).toBeNull();
  });

  it("write_artefact stores under a templated key and records it", async () => {
    const adapter = await make("write_artefact", { key: "runs/{executionId}/{body.name}.json" });
    const result = (await adapter.process(ctx({ name: "doc", n: 1 }))) as AdapterResult;
    expect(result.outputKeys).toEqual(["runs/e1/doc.json"]);
    expect(result.data).toEqual({ name: "doc", n: 1, artefact_key: "runs/e1/doc.json" });
    const stored = storage.files.get("runs/e1/doc.json");
    expect(new TextDecoder().decode(stored?.data)).toBe('{"name":"doc","n":1}');
    expect(stored?.sidecar.lineageId).toBe("l1");
    const missing = (await adapter.process(ctx({ n: 1 }))) as AdapterResult;
    expect(missing.error).toMatch(/placeholder \{body.name\}/);
  });

  it("filter keeps matches and drops the rest", async () => {
    const adapter = await make("filter", { field: "kind", in: ["a", "b"] });
    expect((await adapter.process(ctx({ kind: "a" }))).data).toEqual({ kind: "a" });
    expect((await adapter.process(ctx({ kind: "z" }))).data).toBeNull();
  });

  it("delay waits, and stops at once when cancelled", async () => {
    const adapter = await make("delay", { ms: 60_000 });
    const controller = new AbortController();
    const running = adapter.process(ctx(1, { signal: controller.signal }));
    controller.abort(new Error("shutdown"));
    await expect(running).rejects.toThrow("shutdown");
    const quick = await make("delay", { ms: 1 });
    expect((await quick.process(ctx(7))).data).toBe(7);
  });

  it("fail fails transiently, permanently or fatally by rule", async () => {
    const transient = await make("fail", { mode: "transient", until_attempt: 2 });
    expect((await transient.process(ctx(1, { attempt: 2 }))).retryable).toBe(true);
    expect((await transient.process(ctx(1, { attempt: 3 }))).error).toBeUndefined();
    const permanent = await make("fail", { mode: "permanent", when: { field: "bad", equals: true } });
    expect((await permanent.process(ctx({ bad: true }))).retryable).toBe(false);
    expect((await permanent.process(ctx({ bad: false }))).error).toBeUndefined();
    const fatal = await make("fail", { mode: "fatal" });
    expect((await fatal.process(ctx(1))).metadata?.fatal).toBe(true);
  });

  it("log passes the message on unchanged", async () => {
    const adapter = await make("log", { level: "debug" });
    expect((await adapter.process(ctx({ a: 1 }))).data).toEqual({ a: 1 });
  });
});
