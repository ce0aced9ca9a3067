import { randomUUID } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import type { ExecutionStore } from "@factflow/lineage";
import type { Logger } from "@factflow/protocols";

type LeaseStore = ReturnType<ExecutionStore["cluster"]>;

/** The file in a data directory holding its random id, which names the leases of its processes. */
const DATA_DIR_ID_FILE = "data-dir-id";

/** `<data directory id>/<host>-<pid>-<random>`: a process lease id, as `processNodeId` makes it. */
const PROCESS_NODE_ID = /^[0-9a-f]{12}\/(.+)-(\d+)-[0-9a-f]{8}$/;

/**
 * The lease id of this process: the data directory's id (made once, kept in the directory), then
 * host, pid and a random part. A later process on the same data directory recognises the leases of
 * its predecessors by the prefix, and which of them are gone by host and pid.
 */
export async function processNodeId(dataDir: string): Promise<string> {
  return `${await dataDirId(dataDir)}/${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
}

async function dataDirId(dataDir: string): Promise<string> {
  const file = join(dataDir, DATA_DIR_ID_FILE);
  const fresh = randomUUID().replaceAll("-", "").slice(0, 12);
  try {
    await writeFile(file, `${fresh}\n`, { flag: "wx" });
    return fresh;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  const kept = (await readFile(file, "utf8")).trim();
  if (/^[0-9a-f]{12}$/.test(kept)) return kept;
  await writeFile(file, `${fresh}\n`);
  return fresh;
}

/** True when a process with this pid exists on this machine (a pid of another user's counts). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * The lease of a process that runs executions outside a cluster (a server on the embedded provider,
 * `factflow run`, `factflow executions resume`) on a database other processes may share: while it
 * is renewed, no other process resumes the executions this one owns. Taken at the first `start`
 * (the first execution this process creates, replays or resumes), renewed every quarter of
 * `leaseMs`, given back on `stop`. Cluster servers hold theirs through the engine's `ClusterNode`.
 */
export class ProcessLease {
  readonly nodeId: string;
  readonly leaseMs: number;
  readonly #store: LeaseStore;
  readonly #logger: Logger;
  #started: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #beat: Promise<void> | undefined;
  #stopped = false;

  constructor(options: { store: LeaseStore; nodeId: string; leaseMs: number; logger: Logger }) {
    this.nodeId = options.nodeId;
    this.leaseMs = options.leaseMs;
    this.#store = options.store;
    this.#logger = options.logger;
  }

  /** Takes the lease (once; again after a failed attempt) and keeps renewing it. */
  start(): Promise<void> {
    this.#started ??= this.#take().catch((error: unknown) => {
      this.#started = undefined;
      throw error;
    });
    return this.#started;
  }

  async #take(): Promise<void> {
    await this.#store.heartbeatNode(this.nodeId, this.leaseMs);
    await this.#releaseDeadPredecessors();
    if (this.#stopped) {
      await this.#store.removeNode(this.nodeId);
      return;
    }
    this.#timer = setInterval(() => this.#renew(), Math.max(50, Math.floor(this.leaseMs / 4)));
    this.#timer.unref();
  }

  /**
   * Gives back the leases earlier processes of this data directory left on this host when they
   * died (kill -9): their pid is gone. Their executions are then free to resume at once instead of
   * after the lease runs out. A lease of a live process (another command on the same directory) stays.
   */
  async #releaseDeadPredecessors(): Promise<void> {
    const prefix = this.nodeId.slice(0, this.nodeId.indexOf("/") + 1);
    const host = hostname();
    for (const node of await this.#store.nodeIdsStartingWith(prefix)) {
      const parsed = PROCESS_NODE_ID.exec(node);
      if (node === this.nodeId || parsed === null || parsed[1] !== host) continue;
      const pid = Number(parsed[2]);
      if (pid === process.pid || isAlive(pid)) continue;
      await this.#store.removeNode(node);
      this.#logger.info("released the lease of an earlier process of this data directory that is gone", {
        node,
      });
    }
  }

  /** One renewal at a time; a failure is logged and the next beat tries again. */
  #renew(): void {
    if (this.#stopped || this.#beat !== undefined) return;
    this.#beat = this.#store
      .heartbeatNode(this.nodeId, this.leaseMs)
      .catch((error: Error) =>
        this.#logger.warn("could not renew this process's lease on the database; trying again", {
          error: error.message,
        }),
      )
      .finally(() => {
        this.#beat = undefined;
      });
  }

  /** Stops renewing and gives the lease back: what this process owned is free to resume. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    const started = this.#started;
    if (started === undefined) return;
    await started.catch(() => undefined);
    clearInterval(this.#timer);
    await this.#beat;
    await this.#store
      .removeNode(this.nodeId)
      .catch((error: Error) =>
        this.#logger.warn("could not give this process's lease back", { error: error.message }),
      );
  }
}
