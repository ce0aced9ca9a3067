import { type Logger, silentLogger } from "@factflow/protocols";
import { Client, type Notification } from "pg";
import { describeConnectError } from "./connection-errors.js";
import { redactUrl } from "./redact-url.js";

/**
 * The PostgreSQL channel the stores notify on (in the transaction of the change, so only on commit)
 * when an execution is created or ends, its owner changes, or a lease is given back or claimed.
 */
export const CLUSTER_CHANNEL = "factflow_cluster";

export interface ClusterNotificationsOptions {
  /** The `postgres://` URL of the shared database. */
  readonly databaseUrl: string;
  /** @default silentLogger */
  readonly logger?: Logger;
  /** @default CLUSTER_CHANNEL */
  readonly channel?: string;
  /** First wait before a reconnect; doubles after each failed attempt. @default 250 */
  readonly minBackoffMs?: number;
  /** Longest wait between reconnect attempts. @default 10000 */
  readonly maxBackoffMs?: number;
  /** Seconds a connection attempt may take. @default 10 */
  readonly connectTimeoutSeconds?: number;
  /** `application_name` of the listening connection. @default "factflow-cluster-listen" */
  readonly applicationName?: string;
}

/** Seconds of silence on the socket before TCP keepalive probes it (finds a peer that vanished). */
const KEEPALIVE_SECONDS = 30;

/**
 * One dedicated connection per process that `LISTEN`s on the cluster channel and calls `onChange`
 * for each notification. When the connection dies (a PostgreSQL restart, a terminated backend, a
 * network cut) it is opened again with a doubling backoff; notifications sent meanwhile are lost,
 * so `onChange` is also called once the connection listens again. Nothing here throws or crashes the
 * process: failures are logged and retried until `stop`.
 */
export class ClusterNotifications {
  readonly #options: ClusterNotificationsOptions;
  readonly #logger: Logger;
  readonly #channel: string;
  #onChange: () => void = () => {};
  #client: Client | undefined;
  #retry: NodeJS.Timeout | undefined;
  #backoffMs: number;
  #stopped = false;
  #started = false;
  /** Connection attempts so far; a listen after the first one follows a gap. */
  #attempts = 0;

  constructor(options: ClusterNotificationsOptions) {
    this.#options = options;
    this.#logger = (options.logger ?? silentLogger).child({ component: "cluster-notifications" });
    this.#channel = options.channel ?? CLUSTER_CHANNEL;
    this.#backoffMs = this.#minBackoffMs;
  }

  get #minBackoffMs(): number {
    return Math.max(1, this.#options.minBackoffMs ?? 250);
  }

  /** True while a connection listens on the channel. */
  get listening(): boolean {
    return this.#client !== undefined;
  }

  /**
   * Listens from now on and calls `onChange` for every notification, and after each reconnect.
   * Resolves after the first attempt, whether it listens or will try again (logged); never rejects.
   */
  async start(onChange: () => void): Promise<void> {
    if (this.#started) throw new Error("[factflow/lineage] cluster notifications were started already");
    this.#started = true;
    this.#onChange = onChange;
    await this.#connect();
  }

  /** Stops listening and closes the connection. Idempotent. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
  }

  async #connect(): Promise<void> {
    if (this.#stopped) return;
    this.#attempts++;
    const client = new Client({
      connectionString: this.#options.databaseUrl,
      application_name: this.#options.applicationName ?? "factflow-cluster-listen",
      connectionTimeoutMillis: Math.max(1, Math.round((this.#options.connectTimeoutSeconds ?? 10) * 1000)),
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_SECONDS * 1000,
    });
    let lost = false;
    const onLost = (error: Error | undefined) => {
      if (lost) return;
      lost = true;
      client.removeListener("notification", onNotification);
      if (this.#client === client) this.#client = undefined;
      void client.end().catch(() => undefined);
      if (this.#stopped) return;
      this.#logger.warn("the cluster notification connection was lost; reconnecting", {
        error: error === undefined ? "connection ended" : describeConnectError(error),
        retryInMs: this.#backoffMs,
      });
      this.#scheduleReconnect();
    };
    const onNotification = (message: Notification) => {
      if (message.channel !== this.#channel) return;
      this.#notify();
    };
    // Registered before connecting: an `error` event without a listener would crash the process.
    client.on("error", (error: Error) => onLost(error));
    client.on("end", () => onLost(undefined));
    client.on("notification", onNotification);
    try {
      await client.connect();
      await client.query(`LISTEN "${this.#channel.replace(/"/g, '""')}"`);
    } catch (error) {
      if (lost) return;
      lost = true;
      client.removeListener("notification", onNotification);
      await client.end().catch(() => undefined);
      if (this.#stopped) return;
      this.#logger.warn("could not listen for cluster notifications; trying again", {
        database: redactUrl(this.#options.databaseUrl),
        error: describeConnectError(error),
        retryInMs: this.#backoffMs,
      });
      this.#scheduleReconnect();
      return;
    }
    if (this.#stopped || lost) {
      if (!lost) await client.end().catch(() => undefined);
      return;
    }
    this.#client = client;
    this.#backoffMs = this.#minBackoffMs;
    if (this.#attempts > 1) {
      this.#logger.info("listening for cluster notifications again; running a discovery pass");
      // Notifications sent while no connection listened are lost: look at the database once.
      this.#notify();
    } else {
      this.#logger.debug("listening for cluster notifications", { channel: this.#channel });
    }
  }

  #scheduleReconnect(): void {
    clearTimeout(this.#retry);
    const wait = this.#backoffMs;
    this.#backoffMs = Math.min(this.#options.maxBackoffMs ?? 10_000, wait * 2);
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      void this.#connect();
    }, wait);
    this.#retry.unref();
  }

  #notify(): void {
    try {
      this.#onChange();
    } catch (error) {
      this.#logger.error("a cluster notification handler failed", {
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }
}
