import { type Kysely, sql } from "kysely";
import { notifyCluster } from "./cluster-notify-sql.js";
import type { LineageDatabaseSchema } from "./schema.js";

/**
 * What the processes sharing one database coordinate through (docs/deployment.md): a lease per
 * process in `factflow_nodes` (a server of a cluster, or any process running executions), renewed
 * by its heartbeat, and the owner of each execution. Time is the database's own `now()`, so the
 * processes' clocks never have to agree.
 */
interface ClusterStoreProtocol {
  /** Creates or renews this server's lease for `leaseMs` from now. */
  heartbeatNode(nodeId: string, leaseMs: number): Promise<void>;
  /** Drops this server's lease (a clean shutdown: nothing to take over). */
  removeNode(nodeId: string): Promise<void>;
  /**
   * Removes every lease that expired and returns whose they were. Atomic: each dead server is
   * handed to exactly one caller, which then takes over its executions.
   */
  claimExpiredNodes(): Promise<string[]>;
  /** Moves the running executions owned by `fromNode` to `toNode`; returns their ids. */
  adoptExecutions(fromNode: string, toNode: string): Promise<string[]>;
  /** Records which server owns (created or took over) a running execution. */
  setExecutionOwner(executionId: string, nodeId: string): Promise<void>;
  /** Ids of every execution whose row says `running`, oldest first. */
  runningExecutionIds(): Promise<string[]>;
  /**
   * Every execution whose row says `running`, oldest first, with its owner and whether that owner
   * still has a row in `factflow_nodes` (an expired lease included: a takeover claims it).
   */
  runningExecutionOwners(): Promise<{ id: string; owner: string | null; ownerPresent: boolean }[]>;
  /**
   * Makes `nodeId` the owner of a running execution unless another process holds it: claimed when
   * it has no owner, is owned by `nodeId` already, or its owner's lease expired (or was given
   * back). Under the row's lock, so of several processes claiming at once exactly one wins. Answers
   * whether it was claimed, and who owns the execution now (null when it is no longer running).
   */
  claimExecution(executionId: string, nodeId: string): Promise<{ claimed: boolean; owner: string | null }>;
  /**
   * Ids of the executions `nodeId` owns that ended within the last `withinMs` (by the database's
   * clock): a server taking over after a dead one cleans their queues, since their owner cannot.
   */
  endedExecutionsOwnedBy(nodeId: string, withinMs: number): Promise<string[]>;
  /**
   * True when the execution's owner holds a lease that has not expired; false when it has no owner,
   * or its owner gave its lease back or let it run out (or the execution does not exist).
   */
  executionOwnerLive(executionId: string): Promise<boolean>;
  /** Ids of the leases (live or expired) whose node id starts with `prefix`. */
  nodeIdsStartingWith(prefix: string): Promise<string[]>;
  /** Servers whose lease has not expired, with their owned running executions. */
  liveNodes(): Promise<{ nodeId: string; heartbeatAt: string; owned: number }[]>;
  /**
   * Servers whose lease has not expired yet but whose last heartbeat is older than `silentMs` (by
   * the database's clock): the ones a takeover may soon follow.
   */
  silentNodes(silentMs: number): Promise<string[]>;
}

/** `ClusterStoreProtocol` on the execution store's Kysely handle (PostgreSQL or PGlite). */
export class ClusterStore implements ClusterStoreProtocol {
  readonly #db: Kysely<LineageDatabaseSchema>;
  /** Where owner and lease changes are announced (`NOTIFY`), or undefined (PGlite). */
  readonly #channel: string | undefined;

  /**
   * With `notifyChannel`, a lease given back and every change of an execution's owner send a
   * `NOTIFY` on that channel in the transaction of the change (delivered on commit only).
   */
  constructor(db: Kysely<LineageDatabaseSchema>, options: { readonly notifyChannel?: string } = {}) {
    this.#db = db;
    this.#channel = options.notifyChannel;
  }

  /** Runs `work`, in a transaction that also sends `payload` when it changed something. */
  async #notifying<T>(
    work: (db: Kysely<LineageDatabaseSchema>) => Promise<T>,
    payload: (result: T) => string | undefined,
  ): Promise<T> {
    const channel = this.#channel;
    if (channel === undefined) return work(this.#db);
    return this.#db.transaction().execute(async (trx) => {
      const result = await work(trx);
      const text = payload(result);
      if (text !== undefined) await notifyCluster(trx, channel, text);
      return result;
    });
  }

  async heartbeatNode(nodeId: string, leaseMs: number): Promise<void> {
    const expires = sql<Date>`now() + ${Math.max(1, Math.round(leaseMs))} * interval '1 millisecond'`;
    await this.#db
      .insertInto("factflow_nodes")
      .values({ node_id: nodeId, heartbeat_at: sql<Date>`now()`, lease_expires_at: expires })
      .onConflict((oc) =>
        oc.column("node_id").doUpdateSet({ heartbeat_at: sql<Date>`now()`, lease_expires_at: expires }),
      )
      .execute();
  }

  async removeNode(nodeId: string): Promise<void> {
    // Announced: the others claim the executions it owned at once.
    await this.#notifying(
      (db) => db.deleteFrom("factflow_nodes").where("node_id", "=", nodeId).executeTakeFirst(),
      (result) => (Number(result.numDeletedRows) > 0 ? `left ${nodeId}` : undefined),
    );
  }

  async claimExpiredNodes(): Promise<string[]> {
    const rows = await this.#db
      .deleteFrom("factflow_nodes")
      .where("lease_expires_at", "<", sql<Date>`now()`)
      .returning("node_id")
      .execute();
    return rows.map((r) => r.node_id);
  }

  async adoptExecutions(fromNode: string, toNode: string): Promise<string[]> {
    const rows = await this.#notifying(
      (db) =>
        db
          .updateTable("pipeline_executions")
          .set({ owner_node: toNode })
          .where("owner_node", "=", fromNode)
          .where("status", "=", "running")
          .returning("id")
          .execute(),
      (adopted) => (adopted.length > 0 ? `adopted ${fromNode} ${toNode}` : undefined),
    );
    return rows.map((r) => r.id);
  }

  async setExecutionOwner(executionId: string, nodeId: string): Promise<void> {
    await this.#notifying(
      (db) =>
        db
          .updateTable("pipeline_executions")
          .set({ owner_node: nodeId })
          .where("id", "=", executionId)
          .executeTakeFirst(),
      (result) => (Number(result.numUpdatedRows) > 0 ? `owner ${executionId} ${nodeId}` : undefined),
    );
  }

  async executionOwnerLive(executionId: string): Promise<boolean> {
    const row = await this.#db
      .selectFrom("pipeline_executions as e")
      .innerJoin("factflow_nodes as n", "n.node_id", "e.owner_node")
      .select("n.node_id")
      .where("e.id", "=", executionId)
      .where("n.lease_expires_at", ">=", sql<Date>`now()`)
      .executeTakeFirst();
    return row !== undefined;
  }

  async endedExecutionsOwnedBy(nodeId: string, withinMs: number): Promise<string[]> {
    const since = sql<Date>`now() - ${Math.max(0, Math.round(withinMs))} * interval '1 millisecond'`;
    const rows = await this.#db
      .selectFrom("pipeline_executions")
      .select("id")
      .where("owner_node", "=", nodeId)
      .where("status", "!=", "running")
      .where("finished_at", ">=", since)
      .orderBy("finished_at")
      .execute();
    return rows.map((r) => r.id);
  }

  async runningExecutionIds(): Promise<string[]> {
    const rows = await this.#db
      .selectFrom("pipeline_executions")
      .select("id")
      .where("status", "=", "running")
      .orderBy("created_at")
      .execute();
    return rows.map((r) => r.id);
  }

  async runningExecutionOwners(): Promise<{ id: string; owner: string | null; ownerPresent: boolean }[]> {
    const rows = await this.#db
      .selectFrom("pipeline_executions as e")
      .leftJoin("factflow_nodes as n", "n.node_id", "e.owner_node")
      .select(["e.id", "e.owner_node", "n.node_id"])
      .where("e.status", "=", "running")
      .orderBy("e.created_at")
      .execute();
    return rows.map((r) => ({ id: r.id, owner: r.owner_node, ownerPresent: r.node_id !== null }));
  }

  async claimExecution(
    executionId: string,
    nodeId: string,
  ): Promise<{ claimed: boolean; owner: string | null }> {
    return this.#db.transaction().execute(async (trx) => {
      // The row lock first, then the lease read in a statement of its own: a claimer that waited for
      // the lock reads the winner's lease with a snapshot taken after the winner committed.
      const row = await trx
        .selectFrom("pipeline_executions")
        .select(["owner_node", "status"])
        .where("id", "=", executionId)
        .forUpdate()
        .executeTakeFirst();
      if (row === undefined || row.status !== "running") return { claimed: false, owner: null };
      const owner = row.owner_node;
      if (owner !== null && owner !== nodeId) {
        const live = await trx
          .selectFrom("factflow_nodes")
          .select("node_id")
          .where("node_id", "=", owner)
          .where("lease_expires_at", ">=", sql<Date>`now()`)
          .executeTakeFirst();
        if (live !== undefined) return { claimed: false, owner };
      }
      await trx
        .updateTable("pipeline_executions")
        .set({ owner_node: nodeId })
        .where("id", "=", executionId)
        .execute();
      if (owner !== nodeId) await notifyCluster(trx, this.#channel, `owner ${executionId} ${nodeId}`);
      return { claimed: true, owner: nodeId };
    });
  }

  async nodeIdsStartingWith(prefix: string): Promise<string[]> {
    const pattern = `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    const rows = await this.#db
      .selectFrom("factflow_nodes")
      .select("node_id")
      .where("node_id", "like", pattern)
      .execute();
    return rows.map((r) => r.node_id);
  }

  async silentNodes(silentMs: number): Promise<string[]> {
    const silent = sql<Date>`now() - ${Math.max(0, Math.round(silentMs))} * interval '1 millisecond'`;
    const rows = await this.#db
      .selectFrom("factflow_nodes")
      .select("node_id")
      .where("lease_expires_at", ">=", sql<Date>`now()`)
      .where("heartbeat_at", "<", silent)
      .orderBy("node_id")
      .execute();
    return rows.map((r) => r.node_id);
  }

  async liveNodes(): Promise<{ nodeId: string; heartbeatAt: string; owned: number }[]> {
    const rows = await this.#db
      .selectFrom("factflow_nodes as n")
      .select([
        "n.node_id",
        "n.heartbeat_at",
        (eb) =>
          eb
            .selectFrom("pipeline_executions as e")
            .select(sql<number>`count(*)::int`.as("c"))
            .whereRef("e.owner_node", "=", "n.node_id")
            .where("e.status", "=", "running")
            .as("owned"),
      ])
      .where("n.lease_expires_at", ">=", sql<Date>`now()`)
      .orderBy("n.node_id")
      .execute();
    return rows.map((r) => ({
      nodeId: r.node_id,
      heartbeatAt: new Date(r.heartbeat_at).toISOString(),
      owned: Number(r.owned ?? 0),
    }));
  }
}
