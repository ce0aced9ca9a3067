import {
  type DeadLetter,
  type DeadLetterPage,
  type DeadLetterSource,
  type DeleteDestinationOptions,
  type DeleteDestinationResult,
  type DestinationInfo,
  type DestinationStats,
  Headers,
  type PurgeDestinationResult,
  type QueueAdminProtocol,
} from "@factflow/protocols";
import { deadLetterFromHeaders, invalidInputError, redriveHeaders } from "@factflow/provider-kit";
import type { Redis } from "ioredis";
import { classifyRedisError } from "./classify-error.js";
import { bodyForDisplay, parseHeaders, rawEntry } from "./codec.js";
import type { RedisConfig } from "./config.js";
import { envelopeOfDeadLetter } from "./dead-letter.js";
import { GROUP, type LaneKeys, laneFor } from "./naming.js";
import { DELETE_LANE, DISCARD, PURGE, REDRIVE, runScript, STATS } from "./scripts.js";

/** Dead letters read per round trip while searching, browsing past an offset or redriving. */
const PAGE = 200;
/** Largest browse page. */
const MAX_BROWSE_LIMIT = 1_000;

type Entry = readonly [string, string[]];

/** What the admin needs from the provider. */
export interface AdminDeps {
  readonly config: RedisConfig;
  /** The command connection (only called while the provider is connected). */
  readonly redis: () => Redis;
}

/**
 * The queue admin API over plain Redis commands. Stats come from XLEN / XPENDING / ZCARD in one
 * script; dead letters are read with XRANGE (nothing is removed by a browse) and moved or removed
 * one by one with a script that deletes the dead letter and adds its copy together, so every count
 * is what Redis did.
 */
export class RedisAdmin implements QueueAdminProtocol {
  constructor(private readonly deps: AdminDeps) {}

  private get redis(): Redis {
    return this.deps.redis();
  }

  private lane(source: DeadLetterSource): LaneKeys {
    if (typeof source !== "object" || source === null) {
      throw invalidInputError(
        "redis",
        "invalid_argument",
        'name the destination: { destination: "/queue/<name>" }',
      );
    }
    return laneFor(this.deps.config.keyPrefix, source.destination, source.subscription);
  }

  private async call<T>(operation: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw classifyRedisError(error, operation, this.deps.config.url);
    }
  }

  async listDestinations(): Promise<readonly DestinationInfo[]> {
    const prefix = this.deps.config.keyPrefix;
    return this.call("list destinations", async () => {
      const queues = new Set<string>();
      const queueKey = new RegExp(`^${escapeRegExp(prefix)}\\{q:([^}]*)\\}`);
      for (const key of await this.scan(`${prefix}{q:*`)) {
        const name = queueKey.exec(key)?.[1];
        if (name !== undefined) queues.add(`/queue/${name}`);
      }
      const topics: DestinationInfo[] = [];
      const topicKey = new RegExp(`^${escapeRegExp(prefix)}\\{t:([^}]*)\\}:subs$`);
      for (const key of await this.scan(`${prefix}{t:*}:subs`)) {
        const name = topicKey.exec(key)?.[1];
        if (name === undefined) continue;
        const members = await this.redis.smembers(key);
        topics.push({
          destination: `/topic/${name}`,
          kind: "topic",
          subscriptions: members.map((m) => decodeURIComponent(m)).sort(),
        });
      }
      const listed: DestinationInfo[] = [...queues]
        .sort()
        .map((destination) => ({ destination, kind: "queue" }));
      return [...listed, ...topics.sort((a, b) => a.destination.localeCompare(b.destination))];
    });
  }

  private async scan(pattern: string): Promise<string[]> {
    const keys: string[] = [];
    let cursor = "0";
    do {
      const [next, batch] = await this.redis.scan(cursor, "MATCH", pattern, "COUNT", 1_000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== "0");
    return keys;
  }

  async stats(source: DeadLetterSource): Promise<DestinationStats> {
    const lane = this.lane(source);
    const [length, pending, delayed, dead, consumers] = await this.call(
      `stats of "${lane.destination}"`,
      () =>
        runScript<number[]>(
          this.redis,
          STATS,
          [lane.stream, lane.delayed, lane.dlq, lane.consumers],
          [GROUP, this.deps.config.visibilityTimeoutMs],
        ),
    );
    const base = {
      destination: lane.destination,
      depth: Math.max(0, (length ?? 0) - (pending ?? 0)) + (delayed ?? 0),
      consumers: consumers ?? 0,
      inFlight: pending ?? 0,
      dlqDepth: dead ?? 0,
    };
    return lane.subscription === undefined ? base : { ...base, subscription: lane.subscription };
  }

  async browseDeadLetters(
    source: DeadLetterSource,
    page: { offset: number; limit: number },
  ): Promise<DeadLetterPage> {
    const lane = this.lane(source);
    const offset = page?.offset;
    const limit = page?.limit;
    if (
      !Number.isInteger(offset) ||
      offset < 0 ||
      !Number.isInteger(limit) ||
      limit < 1 ||
      limit > MAX_BROWSE_LIMIT
    ) {
      throw invalidInputError(
        "redis",
        "invalid_argument",
        `browse needs an integer offset >= 0 and a limit from 1 to ${MAX_BROWSE_LIMIT}, got offset ${String(offset)} and limit ${String(limit)}`,
      );
    }
    return this.call(`browse the dead letters of "${lane.destination}"`, async () => {
      const total = await this.redis.xlen(lane.dlq);
      const items: DeadLetter[] = [];
      let start = "-";
      let skipped = 0;
      while (items.length < limit) {
        const want = Math.min(PAGE, offset - skipped + limit - items.length);
        const entries = (await this.redis.xrange(lane.dlq, start, "+", "COUNT", want)) as Entry[];
        for (const entry of entries) {
          if (skipped < offset) skipped += 1;
          else if (items.length < limit) items.push(deadLetterOf(entry));
        }
        if (entries.length < want) break;
        start = `(${entries[entries.length - 1]![0]}`;
      }
      return { total, offset, items };
    });
  }

  async redriveAll(source: DeadLetterSource): Promise<{ redriven: number }> {
    const lane = this.lane(source);
    return this.call(`redrive the dead letters of "${lane.destination}"`, async () => {
      // Only what is there now: a redriven message that fails again is not redriven twice by this call.
      const last = (await this.redis.xrevrange(lane.dlq, "+", "-", "COUNT", 1)) as Entry[];
      const end = last[0]?.[0];
      if (end === undefined) return { redriven: 0 };
      let redriven = 0;
      let start = "-";
      for (;;) {
        const entries = (await this.redis.xrange(lane.dlq, start, end, "COUNT", PAGE)) as Entry[];
        for (const entry of entries) redriven += await this.redriveEntry(lane, entry);
        if (entries.length < PAGE) break;
        start = `(${entries[entries.length - 1]![0]}`;
      }
      return { redriven };
    });
  }

  async redriveOne(source: DeadLetterSource, messageId: string): Promise<{ redriven: boolean }> {
    const lane = this.lane(source);
    return this.call(`redrive message "${messageId}" of "${lane.destination}"`, async () => {
      const entry = await this.find(lane, messageId);
      return { redriven: entry !== undefined && (await this.redriveEntry(lane, entry)) === 1 };
    });
  }

  async discardOne(source: DeadLetterSource, messageId: string): Promise<{ discarded: boolean }> {
    const lane = this.lane(source);
    return this.call(`discard message "${messageId}" of "${lane.destination}"`, async () => {
      const entry = await this.find(lane, messageId);
      const discarded =
        entry !== undefined && (await runScript<number>(this.redis, DISCARD, [lane.dlq], [entry[0]])) === 1;
      return { discarded };
    });
  }

  async purgeDestination(source: DeadLetterSource): Promise<PurgeDestinationResult> {
    const lane = this.lane(source);
    // Undelivered entries only: pending ones stay with their consumers, and the delayed set (delayed
    // publishes and scheduled retries) is promoted into the stream when due.
    const purged = await this.call(`purge "${lane.destination}"`, () =>
      runScript<number>(this.redis, PURGE, [lane.stream], [GROUP]),
    );
    return purged < 0
      ? { purged: 0, reason: `unknown destination "${lane.destination}": nothing to purge` }
      : { purged };
  }

  async deleteDestination(
    source: DeadLetterSource,
    options: DeleteDestinationOptions = {},
  ): Promise<DeleteDestinationResult> {
    const lane = this.lane(source);
    const keep = options.keepDeadLetters !== false;
    const escaped =
      lane.subscriptions === undefined ? "" : lane.stream.slice(lane.stream.lastIndexOf(":s:") + 3);
    const [outcome, a, b] = await this.call(`delete "${lane.destination}"`, () =>
      runScript<[string, number, number]>(
        this.redis,
        DELETE_LANE,
        [lane.stream, lane.delayed, lane.dlq, lane.consumers, lane.subscriptions ?? lane.stream],
        [
          GROUP,
          this.deps.config.visibilityTimeoutMs,
          options.ifEmpty === true ? 1 : 0,
          keep ? 1 : 0,
          escaped,
        ],
      ),
    );
    switch (outcome) {
      case "consumers":
        return { deleted: false, reason: `${a} consumer(s) attached: unsubscribe them first` };
      case "busy":
        return { deleted: false, reason: `not empty: ${a} message(s) waiting, ${b} in flight` };
      case "unknown":
        return a > 0
          ? {
              deleted: false,
              reason: `only ${a} kept dead letter(s) remain; pass keepDeadLetters: false to remove them`,
              deadLettersKept: a,
            }
          : { deleted: false, reason: `unknown destination "${lane.destination}": nothing to delete` };
      default:
        return a > 0
          ? { deleted: true, reason: "dead letters kept", deadLettersKept: a }
          : { deleted: true, deadLettersKept: 0 };
    }
  }

  /** The dead-letter entry of `messageId`, searched oldest first. */
  private async find(lane: LaneKeys, messageId: string): Promise<Entry | undefined> {
    let start = "-";
    for (;;) {
      const entries = (await this.redis.xrange(lane.dlq, start, "+", "COUNT", PAGE)) as Entry[];
      for (const entry of entries) {
        const headers = parseHeaders(rawEntry(entry[1]).headersJson);
        if ((headers?.[Headers.messageId] ?? entry[0]) === messageId) return entry;
      }
      if (entries.length < PAGE) return undefined;
      start = `(${entries[entries.length - 1]![0]}`;
    }
  }

  /** Moves one dead letter back to its lane with a fresh attempt budget; 1 when moved. */
  private redriveEntry(lane: LaneKeys, entry: Entry): Promise<number> {
    const raw = rawEntry(entry[1]);
    const headers = parseHeaders(raw.headersJson) ?? { [Headers.messageId]: entry[0] };
    return runScript<number>(
      this.redis,
      REDRIVE,
      [lane.dlq, lane.stream],
      [entry[0], JSON.stringify(redriveHeaders(headers)), raw.bodyJson],
    );
  }
}

/** A dead-letter entry as the admin API shows it. */
function deadLetterOf(entry: Entry): DeadLetter {
  const raw = rawEntry(entry[1]);
  const headers = parseHeaders(raw.headersJson) ?? {};
  const message = envelopeOfDeadLetter(headers, bodyForDisplay(raw.bodyJson), entry[0]);
  return deadLetterFromHeaders(message, headers, {
    reason: "unknown",
    deadLetteredAt: new Date(Number(entry[0].split("-")[0])).toISOString(),
  });
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
