import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { type DatabaseQueueDefinitionStore, ExecutionStore, type LineageDatabase } from "@factflow/lineage";
import {
  FactflowError,
  type Logger,
  mergeQueueDefinition,
  type QueueDefinition,
  type QueueDefinitionChange,
  type QueueDefinitionListener,
  QueueDefinitionSchema,
  type QueueDefinitionStoreProtocol,
  sameQueueDefinition,
} from "@factflow/protocols";
import * as v from "valibot";

const FILE_NAME = "queue-definitions.json";
const FileSchema = v.object({ version: v.literal(1), queues: v.record(v.string(), QueueDefinitionSchema) });

/** What the queue routes use: the engine's protocol plus one read and the change itself. */
export interface QueueDefinitionStore extends QueueDefinitionStoreProtocol {
  get(name: string): Promise<QueueDefinition | undefined>;
  /** Merges `patch` into the definition of `name`, converges the running consumers, then stores it. */
  define(name: string, patch: QueueDefinition): Promise<QueueDefinitionChange>;
}

/**
 * Named queue definitions in `<data_dir>/queue-definitions.json`, written atomically (temp file +
 * rename). A change is merged into the stored definition, pushed to every listener (the running
 * executions re-subscribe their routes) and only then stored, so a definition the broker refuses
 * (RabbitMQ's immutable `x-max-priority`) is never stored. Changes are applied one at a time.
 */
export class FileQueueDefinitionStore implements QueueDefinitionStore {
  readonly file: string;
  #definitions: Map<string, QueueDefinition> | undefined;
  readonly #listeners = new Set<QueueDefinitionListener>();
  #chain: Promise<unknown> = Promise.resolve();

  constructor(dataDir: string) {
    this.file = join(resolve(dataDir), FILE_NAME);
  }

  async all(): Promise<ReadonlyMap<string, QueueDefinition>> {
    this.#definitions ??= await this.#load();
    return this.#definitions;
  }

  async get(name: string): Promise<QueueDefinition | undefined> {
    return (await this.all()).get(name);
  }

  onChange(listener: QueueDefinitionListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Merges `patch` into the definition of `name`, converges the running consumers, then stores it. */
  define(name: string, patch: QueueDefinition): Promise<QueueDefinitionChange> {
    const next = this.#chain.then(async () => {
      const definitions = new Map(await this.all());
      const current = definitions.get(name) ?? {};
      const merged = mergeQueueDefinition(current, patch);
      const changed = !sameQueueDefinition(merged, current);
      if (changed) {
        await Promise.all([...this.#listeners].map((listener) => listener(name, merged)));
        definitions.set(name, merged);
        await this.#save(definitions);
        this.#definitions = definitions;
      }
      return { queue: name, changed, definition: merged };
    });
    this.#chain = next.catch(() => undefined);
    return next;
  }

  async #load(): Promise<Map<string, QueueDefinition>> {
    let text: string;
    try {
      text = await readFile(this.file, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return new Map();
      throw error;
    }
    const parsed = v.safeParse(FileSchema, JSON.parse(text));
    if (!parsed.success) {
      throw new FactflowError(
        "config_invalid",
        `[factflow/server] ${this.file} is not a valid queue definitions file (${parsed.issues[0]?.message}); fix or delete it`,
      );
    }
    return new Map(Object.entries(parsed.output.queues));
  }

  async #save(definitions: ReadonlyMap<string, QueueDefinition>): Promise<void> {
    await mkdir(dirname(this.file), { recursive: true });
    const temp = `${this.file}.${process.pid}.tmp`;
    const body = { version: 1, queues: Object.fromEntries(definitions) };
    await writeFile(temp, `${JSON.stringify(body, null, 2)}\n`, { flush: true });
    await rename(temp, this.file);
  }
}

const stores = new Map<string, FileQueueDefinitionStore>();

/**
 * The one store of a data directory in this process: the engine (composed at start) and the queue
 * routes share it, so a `PUT` reaches the running executions.
 */
export function queueDefinitionStoreFor(dataDir: string): FileQueueDefinitionStore {
  const key = resolve(dataDir);
  let store = stores.get(key);
  if (store === undefined) {
    store = new FileQueueDefinitionStore(key);
    stores.set(key, store);
  }
  return store;
}

/** The store a runtime runs with, and what stops it. */
export interface OpenedQueueDefinitions {
  readonly store: QueueDefinitionStore;
  close(): Promise<void>;
}

/**
 * Chooses where a runtime keeps its named queue definitions (its routes take the store from the
 * runtime). With
 * lineage on PostgreSQL, in the `factflow_queue_definitions` table every server on that database
 * shares (changes made elsewhere reach this process's consumers by a poll of the table); a
 * `queue-definitions.json` left in the data directory is imported once, for the names the table
 * does not have yet. Otherwise (PGlite, memory) in that file, as a single server needs nothing more.
 */
export async function openQueueDefinitions(
  dataDir: string,
  db: Pick<LineageDatabase, "dialect" | "executions">,
  logger: Logger,
): Promise<OpenedQueueDefinitions> {
  const file = queueDefinitionStoreFor(dataDir);
  if (db.dialect !== "postgres" || !(db.executions instanceof ExecutionStore)) {
    return { store: file, close: async () => {} };
  }
  const table = db.executions.queueDefinitions({ logger });
  await importFile(file, table, logger);
  await table.start();
  return { store: table, close: () => table.close() };
}

async function importFile(
  file: FileQueueDefinitionStore,
  table: DatabaseQueueDefinitionStore,
  logger: Logger,
): Promise<void> {
  let definitions: ReadonlyMap<string, QueueDefinition>;
  try {
    definitions = await file.all();
  } catch (error) {
    logger.warn("queue definitions file not imported: it cannot be read; the database table is used", {
      file: file.file,
      error: (error as Error).message,
    });
    return;
  }
  if (definitions.size === 0) return;
  const imported = await table.importMissing(definitions);
  if (imported.length === 0) return;
  logger.info("imported queue definitions from the data directory into the database", {
    file: file.file,
    queues: imported,
    skipped: [...definitions.keys()].filter((name) => !imported.includes(name)),
  });
}
