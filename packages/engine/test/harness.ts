import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adapters as builtins } from "@factflow/adapters";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { type LineageDatabase, openLineageDatabase } from "@factflow/lineage";
import type {
  AdapterDefinition,
  ArtefactSidecar,
  ExecutionStatus,
  JsonValue,
  LineageProtocol,
  LineageRow,
  QueueProtocol,
  StorageProtocol,
} from "@factflow/protocols";
import { createEngine, type Engine, type ExecutionEvent, loadPipelineConfig } from "../src/index.js";

/** In-memory artefact storage for tests (`@factflow/storage` is tested on its own). */
export function memoryStorage(): StorageProtocol {
  const files = new Map<string, { data: Uint8Array; sidecar: ArtefactSidecar }>();
  return {
    async put(key, data, options = {}) {
      const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
      const sidecar: ArtefactSidecar = {
        key,
        contentType: options.contentType ?? "application/octet-stream",
        size: bytes.length,
        sha256: createHash("sha256").update(bytes).digest("hex"),
        createdAt: new Date().toISOString(),
      };
      files.set(key, { data: bytes, sidecar });
      return sidecar;
    },
    get: async (key) => files.get(key),
    head: async (key) => files.get(key)?.sidecar,
    list: async (prefix = "") =>
      [...files.values()].filter((f) => f.sidecar.key.startsWith(prefix)).map((f) => f.sidecar),
    delete: async (key) => files.delete(key),
    describe: () => "memory",
  };
}

/** What test adapters saw: `sink` calls keyed by execution id. */
export const seen = new Map<string, { route: string; body: JsonValue; attempt: number; at: number }[]>();

/** Blocks registered by tests: `block` adapters wait until `released` or the signal aborts. */
export const blocks = { released: false, entered: 0 };

/** Concurrency seen by `track` adapters: per execution overall, and per route. */
export const concurrency = new Map<string, { now: number; max: number }>();

const bump = (key: string, delta: number) => {
  const c = concurrency.get(key) ?? { now: 0, max: 0 };
  c.now += delta;
  c.max = Math.max(c.max, c.now);
  concurrency.set(key, c);
};

/** Test adapters: `sink` records what reaches it; `block` waits (cancel-safe) until released. */
export const testAdapters: AdapterDefinition[] = [
  {
    type: "sink",
    description: "records every message it receives",
    create: () => ({
      type: "sink",
      process(ctx) {
        const list = seen.get(ctx.executionId) ?? [];
        list.push({ route: ctx.route, body: ctx.message, attempt: ctx.attempt, at: Date.now() });
        seen.set(ctx.executionId, list);
        return { data: ctx.message };
      },
    }),
  },
  {
    type: "track",
    description: "measures how many invocations run at once (per execution and per route)",
    create: () => ({
      type: "track",
      async process(ctx) {
        bump(ctx.executionId, 1);
        bump(`${ctx.executionId}/${ctx.route}`, 1);
        await new Promise((r) => setTimeout(r, 15));
        bump(ctx.executionId, -1);
        bump(`${ctx.executionId}/${ctx.route}`, -1);
        return { data: ctx.message };
      },
    }),
  },
  {
    type: "block",
    description: "waits until released or cancelled",
    create: () => ({
      type: "block",
      process: (ctx) =>
        new Promise((resolve, reject) => {
          blocks.entered++;
          if (blocks.released) return resolve({ data: ctx.message });
          const timer = setInterval(() => {
            if (blocks.released) {
              clearInterval(timer);
              resolve({ data: ctx.message });
            }
          }, 5);
          ctx.signal.addEventListener("abort", () => {
            clearInterval(timer);
            reject(ctx.signal.reason);
          });
        }),
    }),
  },
  {
    type: "hang",
    description: "never finishes and ignores its signal (only a timeout can end it)",
    create: () => ({
      type: "hang",
      process: () => new Promise<never>(() => {}),
    }),
  },
];

export interface Harness {
  engine: Engine;
  db: LineageDatabase;
  queue: QueueProtocol;
  dir: string;
  run(
    yaml: string,
    input?: JsonValue,
  ): Promise<{ id: string; status: ExecutionStatus; events: ExecutionEvent[] }>;
  rows(executionId: string, kind?: "message" | "adapter"): Promise<readonly LineageRow[]>;
  close(): Promise<void>;
}

export function tempDir(): string {
  return mkdtempSync(join(tmpdir(), "factflow-engine-"));
}

/**
 * A provider that forwards every call to `inner`, except the ones `overrides` replaces: how tests put
 * a fault or a tap in front of a real provider.
 */
export function forwarding(
  inner: QueueProtocol,
  overrides: Partial<Pick<QueueProtocol, "publish" | "subscribe">>,
): QueueProtocol {
  return {
    name: inner.name,
    capabilities: inner.capabilities,
    admin: inner.admin,
    connect: () => inner.connect(),
    close: () => inner.close(),
    counters: () => inner.counters(),
    publish: (destination, message) => inner.publish(destination, message),
    subscribe: (destination, handler, options) => inner.subscribe(destination, handler, options),
    ...overrides,
  };
}

/**
 * A lineage store that forwards every call to `inner` (its optional `flushSettled` too, when it has
 * one), except the ones `overrides` replaces: how tests watch or hold back what the engine asks of it.
 */
export function forwardingLineage(
  inner: LineageProtocol,
  overrides: Partial<LineageProtocol> = {},
): LineageProtocol {
  const forward: LineageProtocol = {
    record: (row) => inner.record(row),
    update: (id, change) => inner.update(id, change),
    registerPending: (rows) => inner.registerPending(rows),
    flush: () => inner.flush(),
    countOpen: (id) => inner.countOpen(id),
    counters: () => inner.counters(),
    rows: (id, query) => inner.rows(id, query),
    countsByRoute: (id) => inner.countsByRoute(id),
    tree: (id, messageId, query) => inner.tree(id, messageId, query),
    routeInputs: (id, route, messageIds) => inner.routeInputs(id, route, messageIds),
    close: () => inner.close(),
  };
  const flushSettled = inner.flushSettled?.bind(inner);
  if (flushSettled !== undefined) forward.flushSettled = flushSettled;
  return { ...forward, ...overrides };
}

/** An engine on the real embedded provider (memory mode by default) and a PGlite lineage store. */
export async function openHarness(
  options: {
    queue?: QueueProtocol;
    db?: LineageDatabase;
    maxConcurrent?: number;
    settledMemory?: number;
    reconcileAfterMs?: number;
    /** `createEngine`'s `strictLineage` (its default, true, when absent). */
    strictLineage?: boolean;
    /** Wraps the lineage store the engine sees (to observe calls). */
    wrapLineage?: (lineage: LineageProtocol) => LineageProtocol;
  } = {},
): Promise<Harness> {
  const dir = tempDir();
  // FACTFLOW_TEST_LINEAGE=memory runs the suite on the in-process lineage store instead of PGlite.
  const memory = process.env.FACTFLOW_TEST_LINEAGE === "memory";
  const db = options.db ?? (await openLineageDatabase({ dataDir: join(dir, "db"), memory }));
  const queue = options.queue ?? createEmbeddedProvider({ mode: "memory" });
  await queue.connect();
  const engine = createEngine({
    queue,
    lineage: options.wrapLineage === undefined ? db.lineage : options.wrapLineage(db.lineage),
    executions: db.executions,
    storage: memoryStorage(),
    adapters: [...builtins, ...testAdapters],
    progressIntervalMs: 50,
    ...(options.maxConcurrent === undefined ? {} : { maxConcurrent: options.maxConcurrent }),
    ...(options.settledMemory === undefined ? {} : { settledMemory: options.settledMemory }),
    ...(options.reconcileAfterMs === undefined ? {} : { reconcileAfterMs: options.reconcileAfterMs }),
    ...(options.strictLineage === undefined ? {} : { strictLineage: options.strictLineage }),
  });
  const harness: Harness = {
    engine,
    db,
    queue,
    dir,
    async run(yaml, input) {
      const config = await loadPipelineConfig(yaml, { registry: engine.registry });
      const record = await engine.service.create({ config, ...(input === undefined ? {} : { input }) });
      const events: ExecutionEvent[] = [];
      for await (const event of engine.service.events(record.id, { signal: AbortSignal.timeout(120_000) }))
        events.push(event);
      const status = (await engine.service.get(record.id)).status;
      return { id: record.id, status, events };
    },
    async rows(executionId, kind) {
      const page = await db.lineage.rows(executionId, {
        limit: 10_000,
        ...(kind === undefined ? {} : { kind }),
      });
      return page.items;
    },
    async close() {
      await engine.shutdown();
      await queue.close();
      if (options.db === undefined) await db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return harness;
}

/** Polls `check` until it returns a truthy value or the deadline passes. */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  what: string,
  timeoutMs = 60_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
