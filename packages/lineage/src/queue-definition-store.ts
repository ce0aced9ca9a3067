import {
  FactflowError,
  type Logger,
  mergeQueueDefinition,
  parseQueueDefinition,
  type QueueDefinition,
  type QueueDefinitionChange,
  type QueueDefinitionListener,
  type QueueDefinitionStoreProtocol,
  sameQueueDefinition,
  silentLogger,
} from "@factflow/protocols";
import { type Kysely, sql } from "kysely";
import type { LineageDatabaseSchema } from "./schema.js";

/** Options of {@link DatabaseQueueDefinitionStore}. */
export interface DatabaseQueueDefinitionStoreOptions {
  /** How often the table is read for changes other servers made. @default 1000 */
  readonly pollIntervalMs?: number;
  /** @default silentLogger */
  readonly logger?: Logger;
}

interface StoredRow {
  readonly definition: QueueDefinition;
  readonly revision: number;
}

/** Writes lost to another server's write of the same name before `define` gives up. */
const MAX_WRITE_CONFLICTS = 10;

/**
 * Named queue definitions in the `factflow_queue_definitions` table, shared by every server on the
 * database (docs/deployment.md). Reads always go to the table, so every server answers the same.
 *
 * A `define` merges the patch into the stored row, pushes the result to this process's listeners
 * (its running consumers converge) and only then writes it, conditionally on the row's revision: a
 * definition a listener refuses is never stored, and a concurrent change made on another server is
 * merged into rather than overwritten. Changes made elsewhere reach this process's listeners through
 * a poll of the table (`start`); the poll compares each row's revision with the one last applied
 * here, so a failed poll or a lost connection only delays them. Defines and polls run one at a time.
 */
export class DatabaseQueueDefinitionStore implements QueueDefinitionStoreProtocol {
  readonly #db: Kysely<LineageDatabaseSchema>;
  readonly #logger: Logger;
  readonly #pollIntervalMs: number;
  readonly #listeners = new Set<QueueDefinitionListener>();
  /** Per name, the revision this process's listeners run with. */
  readonly #applied = new Map<string, number>();
  /** Failures already logged (`name@revision`, `poll`), so a retried failure is logged once. */
  readonly #reported = new Set<string>();
  #chain: Promise<unknown> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #started = false;
  #closed = false;

  constructor(db: Kysely<LineageDatabaseSchema>, options: DatabaseQueueDefinitionStoreOptions = {}) {
    this.#db = db;
    this.#logger = (options.logger ?? silentLogger).child({ component: "queue-definitions" });
    this.#pollIntervalMs = Math.max(10, options.pollIntervalMs ?? 1000);
  }

  /**
   * Takes the table as this process's starting point (the executions it starts read the definitions
   * themselves) and polls it from then on. Call before any execution starts.
   */
  async start(): Promise<void> {
    if (this.#started || this.#closed) return;
    this.#started = true;
    await this.#serial(async () => {
      for (const [name, row] of await this.#rows()) this.#applied.set(name, row.revision);
    });
    this.#schedule();
  }

  /** Stops polling and waits for a define or poll in progress. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#chain.catch(() => undefined);
  }

  async all(): Promise<ReadonlyMap<string, QueueDefinition>> {
    const rows = await this.#rows();
    return new Map([...rows].map(([name, row]) => [name, row.definition]));
  }

  async get(name: string): Promise<QueueDefinition | undefined> {
    return (await this.#row(name))?.definition;
  }

  onChange(listener: QueueDefinitionListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Merges `patch` into the definition of `name`, converges this process's consumers, then stores it. */
  define(name: string, patch: QueueDefinition): Promise<QueueDefinitionChange> {
    return this.#serial(async () => {
      for (let conflicts = 0; ; conflicts++) {
        const stored = await this.#row(name);
        const current = stored?.definition ?? {};
        const merged = mergeQueueDefinition(current, patch);
        if (sameQueueDefinition(merged, current)) return { queue: name, changed: false, definition: merged };
        await this.#notify(name, merged);
        const revision = await this.#write(name, merged, stored?.revision);
        if (revision !== undefined) {
          this.#applied.set(name, revision);
          return { queue: name, changed: true, definition: merged };
        }
        // Another server changed the row in between: merge into its version (the listeners have
        // run with ours; the next round or the poll brings them to what is stored).
        if (conflicts >= MAX_WRITE_CONFLICTS) {
          throw new FactflowError(
            "lineage_error",
            `[factflow/lineage] queue definition ${name} kept changing on other servers while it was written; try again`,
          );
        }
      }
    });
  }

  /**
   * Stores each definition whose name has no row yet (an existing row is left alone); returns the
   * names stored. For a one-time import of definitions kept elsewhere before.
   */
  async importMissing(definitions: ReadonlyMap<string, QueueDefinition>): Promise<string[]> {
    return this.#serial(async () => {
      const imported: string[] = [];
      for (const [name, definition] of definitions) {
        const revision = await this.#write(name, definition, undefined);
        if (revision === undefined) continue;
        this.#applied.set(name, revision);
        imported.push(name);
      }
      return imported;
    });
  }

  /** Reads the table once and pushes the changes made elsewhere to the listeners (what the poll does). */
  poll(): Promise<void> {
    return this.#serial(() => this.#pollOnce());
  }

  #schedule(): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => {
      void this.poll().finally(() => this.#schedule());
    }, this.#pollIntervalMs);
    this.#timer.unref();
  }

  async #pollOnce(): Promise<void> {
    let rows: Map<string, StoredRow>;
    try {
      rows = await this.#rows();
    } catch (error) {
      if (!this.#reported.has("poll")) {
        this.#reported.add("poll");
        this.#logger.warn("cannot read the queue definitions; retrying", { error: (error as Error).message });
      }
      return;
    }
    if (this.#reported.delete("poll")) this.#logger.info("reading the queue definitions again");
    for (const name of this.#applied.keys()) if (!rows.has(name)) this.#applied.delete(name);
    for (const [name, row] of rows) {
      if (this.#applied.get(name) === row.revision) continue;
      const key = `${name}@${row.revision}`;
      try {
        await this.#notify(name, row.definition);
        this.#applied.set(name, row.revision);
        this.#reported.delete(key);
        this.#logger.info("queue definition changed on another server; applied", {
          queue: name,
          revision: row.revision,
        });
      } catch (error) {
        // Stays unapplied: the next poll tries again.
        if (!this.#reported.has(key)) {
          this.#reported.add(key);
          this.#logger.warn("could not apply a queue definition changed on another server; retrying", {
            queue: name,
            revision: row.revision,
            error: (error as Error).message,
          });
        }
      }
    }
  }

  async #notify(name: string, definition: QueueDefinition): Promise<void> {
    await Promise.all([...this.#listeners].map((listener) => listener(name, definition)));
  }

  /** Inserts (`expected` undefined) or updates at revision `expected`; undefined when another write won. */
  async #write(name: string, definition: QueueDefinition, expected: number | undefined) {
    const json = sql<string>`${JSON.stringify(definition)}::text::jsonb`;
    const row =
      expected === undefined
        ? await this.#db
            .insertInto("factflow_queue_definitions")
            .values({ name, definition: json, revision: 1, updated_at: sql<Date>`now()` })
            .onConflict((oc) => oc.column("name").doNothing())
            .returning("revision")
            .executeTakeFirst()
        : await this.#db
            .updateTable("factflow_queue_definitions")
            .set({ definition: json, revision: sql<number>`revision + 1`, updated_at: sql<Date>`now()` })
            .where("name", "=", name)
            .where("revision", "=", expected)
            .returning("revision")
            .executeTakeFirst();
    return row === undefined ? undefined : Number(row.revision);
  }

  async #row(name: string): Promise<StoredRow | undefined> {
    const row = await this.#db
      .selectFrom("factflow_queue_definitions")
      .select(["definition", "revision"])
      .where("name", "=", name)
      .executeTakeFirst();
    return row === undefined ? undefined : this.#parse(name, row);
  }

  async #rows(): Promise<Map<string, StoredRow>> {
    const rows = await this.#db
      .selectFrom("factflow_queue_definitions")
      .select(["name", "definition", "revision"])
      .orderBy("name")
      .execute();
    return new Map(rows.map((row) => [row.name, this.#parse(row.name, row)]));
  }

  #parse(name: string, row: { definition: unknown; revision: number }): StoredRow {
    const definition = parseQueueDefinition(
      row.definition,
      `[factflow/lineage] row ${name} of table factflow_queue_definitions`,
    );
    return { definition, revision: Number(row.revision) };
  }

  #serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.#chain.then(work);
    this.#chain = next.catch(() => undefined);
    return next;
  }
}
