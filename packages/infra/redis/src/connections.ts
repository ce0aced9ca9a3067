import type { Logger } from "@factflow/protocols";
import { type Corkable, TurnCork } from "@factflow/provider-kit";
import { Redis, type RedisOptions } from "ioredis";
import type { RedisConfig } from "./config.js";
import { redactSecrets } from "./config.js";

/** Reconnect delays after a lost connection: 100 ms, 200 ms... up to 2 s. */
function retryStrategy(times: number): number {
  return Math.min(times * 100, 2_000);
}

function logErrors(redis: Redis, config: RedisConfig, logger: Logger, role: string): Redis {
  let lastLogged = 0;
  redis.on("error", (error: Error) => {
    // ioredis reports every failed reconnect attempt; one line every few seconds is enough.
    const now = Date.now();
    if (now - lastLogged < 5_000) return;
    lastLogged = now;
    logger.warn(`redis ${role} connection error; reconnecting`, {
      error: redactSecrets(error.message, config.url),
    });
  });
  return redis;
}

/**
 * The command connection: publishes, settlements, heartbeats and admin calls share it, each command
 * written as soon as it is issued (Redis answers them in order, pipelined). Every command rejects after
 * `commandTimeoutMs` rather than hanging on a stalled server; commands sent when the connection
 * dropped are sent again after it comes back (every script is idempotent for that reason).
 */
export function openCommandConnection(config: RedisConfig, logger: Logger): Redis {
  const options: RedisOptions = {
    lazyConnect: true,
    connectionName: config.connectionName,
    connectTimeout: config.connectTimeoutMs,
    commandTimeout: config.commandTimeoutMs,
    // No auto-pipelining: ioredis runs one auto-pipeline per connection at a time, so a command
    // issued while an earlier batch waits for its reply is held back until that batch ends. On a
    // stalled connection a publish would wait out the earlier batch's timeout before its own
    // (about twice commandTimeoutMs). Sent one by one, every command is on the wire at once and
    // times out on its own clock; Redis still answers them pipelined. Publishes and acknowledgement
    // batches cork the socket for the rest of the turn (corkUntilNextTurn), so the commands of one
    // turn still leave in one write.
    enableAutoPipelining: false,
    retryStrategy,
  };
  return logErrors(new Redis(config.url, options), config, logger, "command");
}

/**
 * A subscription's own connection for its blocking `XREADGROUP` (a blocked connection can carry
 * nothing else). No command timeout (the block has its own), and a read cut off by a lost
 * connection is not sent again: the subscription recovers its pending entries itself.
 */
export function openReaderConnection(config: RedisConfig, logger: Logger): Redis {
  const options: RedisOptions = {
    lazyConnect: true,
    connectionName: `${config.connectionName}-reader`,
    connectTimeout: config.connectTimeoutMs,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: null,
    retryStrategy,
  };
  return logErrors(new Redis(config.url, options), config, logger, "reader");
}

/** One cork per socket: a reconnected client writes on a new socket. */
const corks = new WeakMap<Corkable, TurnCork>();

/**
 * Makes one socket write of the commands issued on `redis` during this event-loop turn (the kit's
 * `TurnCork` on its current socket). A no-op while the connection is not ready (ioredis queues those
 * commands itself and writes them on reconnect).
 */
export function corkUntilNextTurn(redis: Redis): void {
  if (redis.status !== "ready") return;
  const socket = (redis as unknown as { stream?: Partial<Corkable> }).stream;
  if (typeof socket?.cork !== "function" || typeof socket.uncork !== "function") return;
  const corkable = socket as Corkable;
  let cork = corks.get(corkable);
  if (cork === undefined) {
    cork = new TurnCork(corkable);
    corks.set(corkable, cork);
  }
  cork.beforeWrite();
}
