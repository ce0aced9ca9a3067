import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { PGLITE_INITDB_ARGS, pgliteSettings } from "./pglite-settings.js";

/**
 * The worker's whole program, plain CommonJS so it runs as is whether this package is loaded from
 * source (tsx, vitest) or from its build. It loads PGlite from the path the main thread resolved,
 * opens the database and answers `query`, `copy`, `begin`/`commit`/`rollback` and `close` messages
 * one by one, in arrival order per PGlite's own queue.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { PGlite } = require(workerData.pglitePath);
let db;
const transactions = new Map();
const describe = (error) => ({
  message: error instanceof Error ? error.message : String(error),
  name: error instanceof Error ? error.name : "Error",
  code: error && typeof error === "object" ? error.code : undefined,
  detail: error && typeof error === "object" ? error.detail : undefined,
});
async function handle(m) {
  switch (m.op) {
    case "open":
      db = await PGlite.create(workerData.dir, {
        startParams: [...PGlite.defaultStartParams, ...workerData.startParams],
        initDbStartParams: workerData.initDbArgs,
      });
      return null;
    case "exec":
      await db.exec(m.text);
      return null;
    case "query": {
      const target = m.tx === undefined ? db : transactions.get(m.tx).tx;
      const r = await target.query(m.text, m.params, m.options);
      return { rows: r.rows, affectedRows: r.affectedRows };
    }
    case "copy":
      await db.query(m.text, [], { blob: new Blob([m.data]) });
      return null;
    case "begin":
      await new Promise((began, failed) => {
        const entry = {};
        entry.done = db.transaction(async (tx) => {
          entry.tx = tx;
          transactions.set(m.tx, entry);
          began();
          await new Promise((commit, rollback) => {
            entry.commit = commit;
            entry.rollback = rollback;
          });
        });
        entry.done.catch(failed);
      });
      return null;
    case "commit":
    case "rollback": {
      const entry = transactions.get(m.tx);
      transactions.delete(m.tx);
      if (entry === undefined) return null;
      if (m.op === "commit") entry.commit();
      else entry.rollback(new Error("rolled back"));
      try {
        await entry.done;
      } catch (error) {
        if (m.op === "commit") throw error;
      }
      return null;
    }
    case "close":
      if (db !== undefined && !db.closed) await db.close();
      return null;
    default:
      throw new Error("unknown operation " + m.op);
  }
}
parentPort.on("message", (m) => {
  handle(m).then(
    (result) => parentPort.postMessage({ id: m.id, result }),
    (error) => parentPort.postMessage({ id: m.id, error: describe(error) }),
  );
});
`;

interface Call {
  resolve(value: unknown): void;
  reject(error: Error): void;
}

/** What the worker answers a query with (what Kysely's PGlite driver reads). */
interface QueryResult {
  rows: unknown[];
  affectedRows?: number;
}

type QueryOptions = { rowMode?: "object" | "array" };

/**
 * A PGlite database running on a worker thread. It offers the part of PGlite's interface that
 * Kysely's `PGliteDialect` and the lineage writer use (`query`, `transaction`, `close`, `closed`,
 * `ready`, `waitReady`, plus {@link copy} for the writer's `COPY`), so parsing, planning and writing
 * lineage batches never take the event loop that runs the pipeline. Every call is one message each
 * way; the rows come back structured-cloned (dates stay dates).
 */
export class PgliteWorkerClient {
  closed = false;
  ready = false;
  readonly #worker: Worker;
  readonly #calls = new Map<number, Call>();
  #next = 1;
  #failure: Error | undefined;

  private constructor(dir: string, startParams: readonly string[]) {
    const pglitePath = createRequire(import.meta.url).resolve("@electric-sql/pglite");
    this.#worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { dir, pglitePath, startParams, initDbArgs: PGLITE_INITDB_ARGS },
    });
    // Only calls in flight keep the process alive (see #call); an idle database never does.
    this.#worker.unref();
    this.#worker.on("message", (m: { id: number; result?: unknown; error?: ErrorShape }) => {
      const call = this.#calls.get(m.id);
      if (call === undefined) return;
      this.#calls.delete(m.id);
      if (this.#calls.size === 0) this.#worker.unref();
      if (m.error === undefined) call.resolve(m.result);
      else call.reject(toError(m.error));
    });
    const fail = (error: Error) => {
      this.#failure = error;
      this.closed = true;
      for (const call of this.#calls.values()) call.reject(error);
      this.#calls.clear();
    };
    this.#worker.on("error", (error) =>
      fail(
        new Error(`[factflow/lineage] the PGlite worker thread failed: ${error.message}`, { cause: error }),
      ),
    );
    this.#worker.on("exit", (code) => {
      if (!this.closed) fail(new Error(`[factflow/lineage] the PGlite worker thread exited (code ${code}).`));
    });
  }

  /** Starts the worker and opens (creating if needed) the database in `dir`. */
  static async open(dir: string): Promise<PgliteWorkerClient> {
    const client = new PgliteWorkerClient(dir, await pgliteSettings(dir));
    try {
      await client.#call({ op: "open" });
    } catch (error) {
      client.closed = true;
      client.#worker.ref();
      await client.#worker.terminate();
      throw error;
    }
    client.ready = true;
    return client;
  }

  waitReady = Promise.resolve();

  query(text: string, params: unknown[] = [], options?: QueryOptions): Promise<QueryResult> {
    return this.#call({ op: "query", text, params, options }) as Promise<QueryResult>;
  }

  /** Runs statements with the simple protocol (e.g. `VACUUM`, which cannot run in a transaction). */
  async exec(text: string): Promise<void> {
    await this.#call({ op: "exec", text });
  }

  /**
   * Runs `COPY … FROM '/dev/blob'` fed with `data`. A large `data` that is the only view of its
   * memory is moved to the worker, not copied: structured-cloning a batch that carries a 5 MB
   * payload held the event loop for 60 ms. The caller must not use `data` afterwards.
   */
  async copy(text: string, data: Uint8Array): Promise<void> {
    await this.#call({ op: "copy", text, data }, movable(data));
  }

  /** PGlite's `transaction`: the callback's queries run inside one transaction in the worker. */
  async transaction<T>(callback: (tx: { query: PgliteWorkerClient["query"] }) => Promise<T>): Promise<T> {
    const tx = this.#next++;
    await this.#call({ op: "begin", tx });
    let result: T;
    try {
      result = await callback({
        query: (text, params = [], options) =>
          this.#call({ op: "query", tx, text, params, options }) as Promise<QueryResult>,
      });
    } catch (error) {
      await this.#call({ op: "rollback", tx }).catch(() => {});
      throw error;
    }
    await this.#call({ op: "commit", tx });
    return result;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    try {
      await this.#call({ op: "close" });
    } finally {
      this.closed = true;
      // An unref'd worker does not keep the process alive while it terminates: with nothing else
      // left (a server closing on SIGTERM) the process would end inside close(), exit code 13.
      this.#worker.ref();
      await this.#worker.terminate();
    }
  }

  #call(message: Record<string, unknown>, transfer: readonly ArrayBuffer[] = []): Promise<unknown> {
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    if (this.closed) return Promise.reject(new Error("[factflow/lineage] the PGlite database is closed."));
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      if (this.#calls.size === 0) this.#worker.ref();
      this.#calls.set(id, { resolve, reject });
      this.#worker.postMessage({ ...message, id }, transfer as ArrayBuffer[]);
    });
  }
}

/**
 * Below this a copy costs less than it saves, and a small buffer may be a slice of Node's shared
 * pool, whose memory other buffers of this thread use.
 */
const MOVE_MIN_BYTES = 64 * 1024;

/** The memory behind `data` when moving it to the worker is both safe and worth it. */
function movable(data: Uint8Array): ArrayBuffer[] {
  const memory = data.buffer;
  if (!(memory instanceof ArrayBuffer) || data.byteLength < MOVE_MIN_BYTES) return [];
  // Node's pool slabs are 8 KiB, so a view this large has memory of its own; at most a little of it
  // lies outside the view (the COPY encoder's unused tail), which moves with it.
  return [memory];
}

interface ErrorShape {
  message: string;
  name: string;
  code?: string;
  detail?: string;
}

/** An Error carrying the database's `code` (e.g. 23505), as the writer's fallbacks expect. */
function toError(shape: ErrorShape): Error {
  const error = new Error(shape.message) as Error & { code?: string; detail?: string };
  error.name = shape.name;
  if (shape.code !== undefined) error.code = shape.code;
  if (shape.detail !== undefined) error.detail = shape.detail;
  return error;
}
