import type {
  ExecutionRecord,
  ExecutionStoreProtocol,
  LineageProtocol,
  LineageRow,
  Logger,
  QueueProtocol,
} from "@factflow/protocols";
import { ProviderError } from "@factflow/protocols";
import { openRowsOf } from "../lineage/dead-invocations.js";
import type { ExecutionService } from "./execution-service.js";
import type { OrchestratorManager } from "./orchestrator-manager.js";
import { openMessageRows } from "./reseed.js";
import { scopedDestination } from "./scoped-destination.js";

/**
 * The database side of a cluster (implemented by `@factflow/lineage`'s `ExecutionStore.cluster()`):
 * a lease per server renewed by its heartbeat, and the owner of each execution.
 */
interface ClusterStore {
  heartbeatNode(nodeId: string, leaseMs: number): Promise<void>;
  removeNode(nodeId: string): Promise<void>;
  /** Removes the expired leases and returns their servers; each is handed to one caller only. */
  claimExpiredNodes(): Promise<string[]>;
  adoptExecutions(fromNode: string, toNode: string): Promise<string[]>;
  /**
   * Servers whose lease still runs but whose last heartbeat is older than `silentMs`. Optional:
   * without it, watching for a takeover starts only once a lease has expired.
   */
  silentNodes?(silentMs: number): Promise<string[]>;
  setExecutionOwner(executionId: string, nodeId: string): Promise<void>;
  runningExecutionIds(): Promise<string[]>;
  /**
   * The running executions with their owner, and whether that owner still holds a lease row (an
   * expired one included: the takeover claims it). Optional: without it, a server polls for the
   * completion of only the executions it created or adopted at a takeover.
   */
  runningExecutionOwners?(): Promise<RunningExecutionOwner[]>;
  /**
   * Makes `nodeId` the owner of a running execution whose owner holds no live lease (it stopped
   * cleanly, or never had one); `claimed` false when a live server owns it.
   */
  claimExecution?(executionId: string, nodeId: string): Promise<{ claimed: boolean }>;
  /**
   * Ids of the executions `nodeId` owns that ended within the last `withinMs`. Optional: without it,
   * the queues of an execution that ended while its owner was dead are left to the broker.
   */
  endedExecutionsOwnedBy?(nodeId: string, withinMs: number): Promise<string[]>;
}

/**
 * Tells a server at once that another process changed the shared state: an execution created or
 * ended, an owner changed, a lease given back (`@factflow/lineage`'s `ClusterNotifications`, on
 * PostgreSQL `LISTEN`). `onChange` is also called after a gap in which changes may have been missed.
 */
export interface ClusterChanges {
  start(onChange: () => void): Promise<void>;
  stop(): Promise<void>;
}

/** A running execution, its owner and whether that owner still holds a lease row. */
export interface RunningExecutionOwner {
  readonly id: string;
  readonly owner: string | null;
  readonly ownerPresent: boolean;
}

export interface ClusterOptions {
  /** This server's id; unique per process (a restarted server is a new node). */
  readonly nodeId: string;
  readonly store: ClusterStore;
  /** How long a lease lasts without a heartbeat; a server silent this long is taken over. @default 10000 */
  readonly leaseMs?: number;
  /**
   * Interval of the lease checks (expired leases to take over, silent servers to watch), and of
   * discovery while a takeover is watched. @default 1000
   */
  readonly pollMs?: number;
  /**
   * Wakes discovery (running executions to join, ended ones to stop, owners that left) as soon as
   * another process changes them; discovery then runs on each change and every `discoveryMs`.
   */
  readonly changes?: ClusterChanges;
  /**
   * Interval of discovery when nothing wakes it sooner. @default 5000 with `changes`, else `pollMs`
   */
  readonly discoveryMs?: number;
  /**
   * Deletes the broker queues of an execution that ended while its owner was dead: the owner cleans
   * an execution's queues when it ends there, and a dead one never will. Called by the server that
   * takes the dead one over.
   */
  readonly cleanUpQueues?: (record: ExecutionRecord) => void | Promise<void>;
  /**
   * After a takeover, how long an execution must hold exactly the same open rows while the broker
   * holds nothing for it before its open messages are re-published. @default 2000 on a provider whose
   * stats are broker-wide (`capabilities.brokerWideStats`); otherwise twice its longest retry delay,
   * at least 5000
   */
  readonly settleMs?: number;
  /**
   * Called once for each dead server this one takes over, before its executions are watched: hands
   * that server's unacknowledged deliveries to a live consumer at once where the broker would only
   * move them after a timeout of its own (Redis: the pending entries of its consumers). A failure is
   * logged; the broker's own timeout still moves them.
   */
  readonly claimDeadNode?: (nodeId: string) => Promise<void>;
}

interface Services {
  readonly service: ExecutionService;
  readonly manager: OrchestratorManager;
  readonly queue: QueueProtocol;
  readonly lineage: LineageProtocol;
  readonly executions: ExecutionStoreProtocol;
  readonly logger: Logger;
}

/** An execution a dead server took part in, watched until it completes or is found stuck. */
interface Watch {
  /**
   * True once a dead server's lease was claimed; before that (a server fell silent, its lease still
   * runs) the execution is only watched for quiet, and nothing is closed or re-published.
   */
  armed: boolean;
  /**
   * The open rows (id, status and attempt of each) seen with nothing on the broker, and since when;
   * undefined once anything moved. Any change of a row means something still works on the execution.
   */
  quiet: { readonly rows: string; readonly since: number } | undefined;
  /** The look due at the end of the settle time (the poll alone may come up to `pollMs` later). */
  timer: NodeJS.Timeout | undefined;
}

/** How long a failed join waits before it is tried again. */
const JOIN_RETRY_MS = 15_000;

/**
 * The default settle time where the broker's stats are broker-wide. With nothing on the broker, what
 * a live server can still have under way outside it is a lineage write around a delivery: an open row
 * held in the writer's memory (`holdOpenMs`, 250 ms by default), the commit of a delivery's rows
 * before its acknowledgement, an output's registration before its publish. Each changes an open row
 * or ends on the broker within one commit; a commit that fails is retried after 100, 200, 400 and
 * 800 ms.
 */
const BROKER_WIDE_SETTLE_MS = 2000;

/**
 * The default floor where the stats see only this process's deliveries (RabbitMQ): a handler running
 * on another live server, and a retry another server scheduled, are invisible, so only time tells.
 */
const LOCAL_STATS_SETTLE_MS = 5000;

/** Watched executions looked at side by side: each look waits on the database and the broker. */
const LOOKS_AT_ONCE = 4;

/**
 * One server of a cluster (several `factflow serve` on one broker and one PostgreSQL): keeps its
 * lease, joins every running execution as a competing consumer, stops the ones another server
 * ended, and takes over after a server whose lease expired. A dead server's unacknowledged
 * deliveries come back from the broker by themselves; what it took with it is lineage: adapter rows
 * left open and messages acknowledged whose closing write never committed. From the lease expiry
 * on, an adapter row left open beside a message that has settled since is closed at once (the
 * message ran elsewhere). Once an execution has held exactly the same open rows, with nothing on the
 * broker for it at the start and at the end, for the settle time (so no live server is working on
 * them), the taker closes the remaining dead invocations and re-publishes the open messages, marked
 * re-seeded.
 */
export class ClusterNode {
  readonly nodeId: string;
  readonly #options: ClusterOptions;
  readonly #services: Services;
  readonly #leaseMs: number;
  readonly #pollMs: number;
  readonly #discoveryMs: number;
  /** A change was announced (or a pass asked for): the next pass runs discovery whatever the time. */
  #discoveryDue = true;
  /** When discovery last ran (`Date.now()`). */
  #discoveredAt = 0;
  /** A wake-up is queued for the end of the current turn (many notifications, one pass). */
  #wakeQueued = false;
  readonly #joining = new Set<string>();
  readonly #joinFailedAt = new Map<string, number>();
  readonly #watch = new Map<string, Watch>();
  /**
   * Executions this server owns (created, adopted at a takeover, or claimed from an owner that left):
   * their completion gates poll whether or not work is held here; the others' only while it is.
   */
  readonly #owned = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #heartbeatTimer: NodeJS.Timeout | undefined;
  #tick: Promise<void> | undefined;
  #beat: Promise<void> | undefined;
  #stopped = false;
  /** Interval of the lease renewals (heartbeats). */
  get #beatMs(): number {
    return Math.max(50, Math.floor(this.#leaseMs / 4));
  }

  constructor(options: ClusterOptions, services: Services) {
    this.nodeId = options.nodeId;
    this.#options = options;
    this.#services = services;
    this.#leaseMs = options.leaseMs ?? 10_000;
    this.#pollMs = options.pollMs ?? 1000;
    this.#discoveryMs = Math.max(
      this.#pollMs,
      options.discoveryMs ?? (options.changes === undefined ? this.#pollMs : 5000),
    );
  }

  /** Runs discovery as soon as possible: once for all the calls made in one turn of the event loop. */
  wake(): void {
    this.#discoveryDue = true;
    if (this.#wakeQueued || this.#stopped) return;
    this.#wakeQueued = true;
    setImmediate(() => {
      this.#wakeQueued = false;
      void this.#run();
    });
  }

  /** Takes the lease, joins what runs, and keeps doing so every `pollMs`. */
  async start(): Promise<void> {
    await this.#options.store.heartbeatNode(this.nodeId, this.#leaseMs);
    // The lease is renewed on its own timer: a discovery pass that takes long (many executions, a
    // slow database) must never let a live server's lease run out and get it taken over.
    this.#heartbeatTimer = setInterval(() => this.#renew(), this.#beatMs);
    this.#heartbeatTimer.unref();
    // Listening before the first pass: an execution created meanwhile is either seen by the pass or
    // announced afterwards.
    await this.#options.changes?.start(() => this.wake());
    await this.#run();
    this.#timer = setInterval(() => void this.#run(), this.#pollMs);
    this.#timer.unref();
  }

  /** Stops discovery and gives the lease back (nothing for the others to take over). */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearInterval(this.#timer);
    clearInterval(this.#heartbeatTimer);
    await this.#options.changes
      ?.stop()
      .catch((error: Error) =>
        this.#services.logger.warn("could not stop listening for cluster changes", { error: error.message }),
      );
    await this.#tick?.catch(() => undefined);
    await this.#beat;
    await this.#options.store
      .removeNode(this.nodeId)
      .catch((error: Error) =>
        this.#services.logger.warn("could not give the cluster lease back", { error: error.message }),
      );
  }

  /** Records this server as the owner of an execution it created. */
  async own(executionId: string): Promise<void> {
    await this.#options.store.setExecutionOwner(executionId, this.nodeId);
    this.#owned.add(executionId);
  }

  #run(): Promise<void> {
    if (this.#stopped || this.#tick !== undefined) return this.#tick ?? Promise.resolve();
    this.#tick = this.#once()
      .then(
        () => true,
        (error: Error) => {
          this.#services.logger.warn("cluster poll failed; trying again", { error: error.message });
          return false;
        },
      )
      .then((succeeded) => {
        this.#tick = undefined;
        // Announced while the pass ran, maybe after it read the executions: one more pass. After a
        // failure the next timer tick tries again instead (no loop on a database that is down).
        if (succeeded && this.#discoveryDue && !this.#stopped) this.wake();
      });
    return this.#tick;
  }

  /** One lease renewal at a time; a failure is logged and the next beat tries again. */
  #renew(): void {
    if (this.#stopped || this.#beat !== undefined) return;
    this.#beat = this.#options.store
      .heartbeatNode(this.nodeId, this.#leaseMs)
      .catch((error: Error) =>
        this.#services.logger.warn("could not renew the cluster lease; trying again", {
          error: error.message,
        }),
      )
      .finally(() => {
        this.#beat = undefined;
      });
  }

  async #once(): Promise<void> {
    const { store } = this.#options;
    const { manager, service, logger, executions } = this.#services;
    const dead = await store.claimExpiredNodes();
    // A server that missed two heartbeats is likely dead: the quiet its executions keep from now on
    // counts towards the settle time, so a takeover at its lease expiry need not wait it out again.
    const silent = (await store.silentNodes?.(2 * this.#beatMs))?.filter((n) => n !== this.nodeId) ?? [];
    // The leases are checked every pass; the running executions only when something may have
    // changed: a change announced, a takeover under way or near, or the discovery interval gone by.
    const started = Date.now();
    const due =
      this.#discoveryDue ||
      dead.length > 0 ||
      silent.length > 0 ||
      this.#watch.size > 0 ||
      // Half a poll of slack: the timer's passes land on the interval give or take a millisecond.
      started - this.#discoveredAt + this.#pollMs / 2 >= this.#discoveryMs;
    if (!due) return;
    this.#discoveryDue = false;
    this.#discoveredAt = started;
    const owners = await store.runningExecutionOwners?.();
    const running = owners?.map((o) => o.id) ?? (await store.runningExecutionIds());
    for (const node of dead) {
      await this.#options.claimDeadNode?.(node).catch((error: Error) =>
        logger.warn("could not claim a dead server's deliveries; the broker moves them later", {
          deadNode: node,
          error: error.message,
        }),
      );
      const adopted = await store.adoptExecutions(node, this.nodeId);
      for (const id of adopted) this.#owned.add(id);
      await this.#cleanUpEndedOf(node);
      logger.warn("took over after a server whose lease expired", {
        deadNode: node,
        adoptedExecutions: adopted.length,
        watchedExecutions: running.length,
      });
      // It consumed every running execution, so any of them may hold what it left behind.
      for (const id of running) {
        const watch = this.#watch.get(id);
        if (watch === undefined) this.#watch.set(id, { armed: true, quiet: undefined, timer: undefined });
        else watch.armed = true;
      }
    }
    if (silent.length > 0) {
      for (const id of running)
        if (!this.#watch.has(id)) this.#watch.set(id, { armed: false, quiet: undefined, timer: undefined });
    } else {
      for (const [id, watch] of this.#watch) if (!watch.armed) this.#unwatch(id);
    }
    if (this.#stopped) return;
    const now = Date.now();
    const live = new Set(running);
    for (const id of running) {
      if (manager.get(id) !== undefined || this.#joining.has(id)) continue;
      const failedAt = this.#joinFailedAt.get(id);
      if (failedAt !== undefined && now - failedAt < JOIN_RETRY_MS) continue;
      this.#joining.add(id);
      void service
        .join(id)
        .then(
          () => this.#joinFailedAt.delete(id),
          (error: Error) => {
            this.#joinFailedAt.set(id, Date.now());
            logger.warn("could not join a running execution; trying again later", {
              executionId: id,
              error: error.message,
            });
          },
        )
        .finally(() => this.#joining.delete(id));
    }
    // Running here, no longer running in the database: another server ended it.
    for (const id of manager.active()) {
      if (live.has(id) || this.#joining.has(id)) continue;
      const row = await executions.getExecution(id, { includeInput: false });
      if (row !== undefined && row.status !== "running") await service.endedElsewhere(id);
    }
    for (const id of [...this.#joinFailedAt.keys()]) if (!live.has(id)) this.#joinFailedAt.delete(id);
    // An owner that stopped cleanly gave its lease back: one live server claims its executions, so
    // each keeps one server polling for its completion (and reconciling lost writes).
    for (const { id, owner, ownerPresent } of owners ?? []) {
      if (owner === this.nodeId) this.#owned.add(id);
      else if (!ownerPresent && !this.#stopped && store.claimExecution !== undefined) {
        if ((await store.claimExecution(id, this.nodeId)).claimed) this.#owned.add(id);
      }
    }
    for (const id of [...this.#owned]) {
      if (!live.has(id)) this.#owned.delete(id);
      else manager.get(id)?.own();
    }
    for (const id of [...this.#watch.keys()]) if (!live.has(id)) this.#unwatch(id);
    // Side by side: one by one, a pass over many executions on a loaded database and broker took
    // seconds, and each pass is one step of a takeover.
    const watched = [...this.#watch];
    const next = async (): Promise<void> => {
      for (let entry = watched.shift(); entry !== undefined; entry = watched.shift()) {
        const [id, watch] = entry;
        if (this.#stopped) return;
        await this.#recoverIfStuck(id, watch).catch((error: Error) =>
          logger.warn("takeover: looking at an execution failed; trying again", {
            executionId: id,
            error: error.message,
          }),
        );
      }
    };
    await Promise.all(Array.from({ length: Math.min(LOOKS_AT_ONCE, watched.length) }, next));
  }

  /**
   * Cleans the queues of the executions a dead server owned that ended since it died: the live
   * servers that ended them left the queues to their owner. The window reaches back past the death
   * (at most a lease before the expiry, which this claim follows); re-cleaning what the dead server
   * cleaned itself finds nothing to delete.
   */
  async #cleanUpEndedOf(deadNode: string): Promise<void> {
    const { cleanUpQueues } = this.#options;
    const { store } = this.#options;
    if (cleanUpQueues === undefined || store.endedExecutionsOwnedBy === undefined) return;
    const { executions, logger } = this.#services;
    try {
      const ended = await store.endedExecutionsOwnedBy(deadNode, 2 * this.#leaseMs + this.#discoveryMs);
      for (const id of ended) {
        const record = await executions.getExecution(id);
        if (record !== undefined) await cleanUpQueues(record);
      }
    } catch (error) {
      logger.warn("could not clean the queues of executions a dead server owned", {
        deadNode,
        error: (error as Error).message,
      });
    }
  }

  #unwatch(executionId: string): void {
    clearTimeout(this.#watch.get(executionId)?.timer);
    this.#watch.delete(executionId);
  }

  /** Looks at the watched executions again in `ms` (after the pass under way, if any). */
  #lookAgainIn(watch: Watch, ms: number): void {
    clearTimeout(watch.timer);
    watch.timer = setTimeout(() => {
      watch.timer = undefined;
      void (this.#tick ?? Promise.resolve()).then(() => this.#run());
    }, ms);
    watch.timer.unref();
  }

  /** True while this server handles a delivery of the execution or publishes one of its outputs. */
  #busyHere(executionId: string): boolean {
    const orchestrator = this.#services.manager.get(executionId);
    if (orchestrator === undefined) return false;
    const progress = orchestrator.progress();
    return (
      progress.seedPending > 0 ||
      progress.routes.some((r) => r.inFlight > 0 || r.outputsPending > 0 || r.held > 0)
    );
  }

  /** True when the broker holds anything for one of the execution's routes (waiting, scheduled or delivered). */
  async #brokerHolds(executionId: string, record: ExecutionRecord): Promise<boolean> {
    for (const route of Object.values(record.configSnapshot.routes)) {
      const destination = scopedDestination(executionId, route.inbound.queue);
      try {
        const stats = await this.#services.queue.admin.stats({ destination });
        if (stats.depth + stats.inFlight > 0) return true;
      } catch (error) {
        if (!(error instanceof ProviderError && error.reason === "not-found")) throw error;
      }
    }
    return false;
  }

  #settleMs(record: ExecutionRecord): number {
    if (this.#options.settleMs !== undefined) return this.#options.settleMs;
    if (this.#services.queue.capabilities.brokerWideStats === true) return BROKER_WIDE_SETTLE_MS;
    const retry = record.configSnapshot.settings.retry;
    const longestDelay = Math.max(
      retry.max_delay_ms,
      ...Object.values(record.configSnapshot.routes).map((r) => r.retry?.max_delay_ms ?? retry.max_delay_ms),
    );
    return Math.max(LOCAL_STATS_SETTLE_MS, 2 * longestDelay);
  }

  /**
   * Re-publishes the open messages of an execution nothing works on any more: the broker held
   * nothing for it at two looks the settle time apart, and its open rows stayed exactly the same.
   */
  async #recoverIfStuck(executionId: string, watch: Watch): Promise<void> {
    const { lineage, executions, manager, service, logger } = this.#services;
    // Committed rows only, no flush: this server's own held rows belong to deliveries it runs (then
    // it is busy) or to messages waiting on the broker (then the broker holds something), and a
    // flush would write every held row open at each look.
    const open = await openRowsOf(lineage, executionId);
    if (open.length === 0) {
      this.#unwatch(executionId);
      return;
    }
    // The dead server's lease has expired, so whatever it held unacknowledged has gone back to the
    // broker: an invocation row it left open beside a message that settled since is closed at once,
    // without waiting for the settle time (which only the re-publish below still needs).
    // Closing them changes no row the quiet is judged on (see fingerprint), so quiet seen before the
    // claim still counts.
    if (watch.armed && (await service.closeInvocationsOfSettledMessages(executionId, open)) > 0)
      manager.get(executionId)?.nudgeCompletion();
    const record = await executions.getExecution(executionId);
    if (record === undefined || record.status !== "running") {
      this.#unwatch(executionId);
      return;
    }
    // Rows are read before the broker: a message under way between the two either shows on the
    // broker or changes a row by the next look.
    if (this.#busyHere(executionId) || (await this.#brokerHolds(executionId, record))) {
      watch.quiet = undefined;
      return;
    }
    const rows = fingerprint(open);
    const now = Date.now();
    const settleMs = this.#settleMs(record);
    if (watch.quiet?.rows !== rows) {
      watch.quiet = { rows, since: now };
      this.#lookAgainIn(watch, settleMs);
      logger.debug("takeover: the broker holds nothing for the execution; waiting the settle time", {
        executionId,
        openRows: open.length,
        settleMs,
        since: new Date(now).toISOString(),
      });
      return;
    }
    if (now - watch.quiet.since < settleMs || !watch.armed) return;
    watch.quiet = undefined;
    await service.closeDeadInvocations(executionId);
    const { messages, missing } = await openMessageRows(lineage, executionId);
    if (missing.length > 0)
      logger.warn("open message rows without a recorded payload cannot be re-published", {
        executionId,
        count: missing.length,
      });
    if (messages.length === 0) return;
    logger.warn(`re-publishing ${messages.length} messages a dead server left open`, { executionId });
    manager.get(executionId)?.markReseeded(messages.map((m) => m.id));
    await manager.reseed(record, messages);
  }
}

/**
 * The open rows as one string: id, status and attempt of each, in id order. An adapter row whose
 * message has no open row is left out: beside a settled message it belongs to a dead invocation,
 * closed at the claim, and that must not restart the settle time.
 */
function fingerprint(rows: readonly LineageRow[]): string {
  const openMessages = new Set(rows.filter((r) => r.kind === "message").map((r) => r.messageId));
  return rows
    .filter((r) => r.kind !== "adapter" || openMessages.has(r.messageId))
    .map((r) => `${r.id}:${r.status}:${r.attempt}`)
    .sort()
    .join(",");
}
