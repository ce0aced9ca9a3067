import { errorText, type Logger } from "@factflow/protocols";
import type { Redis } from "ioredis";
import { escapeSubscription, GROUP, type LaneKeys } from "./naming.js";
import { entriesOf, type StreamEntries } from "./read-loop.js";
import { CLAIM_DEAD, JOIN, LEAVE, REAP, runScript, TOUCH } from "./scripts.js";

/** What a consumer's membership of its lane's group needs. */
export interface MembershipDeps {
  /** The shared command connection. */
  readonly redis: Redis;
  readonly lane: LaneKeys;
  /** This subscription's consumer name in the group. */
  readonly consumer: string;
  readonly visibilityTimeoutMs: number;
  readonly logger: Logger;
  /** Name prefixes of consumers known to be dead (their server's cluster lease expired). */
  readonly deadConsumers: () => readonly string[];
}

/**
 * One consumer's place in its lane's consumer group: joining and leaving it, the heartbeat that
 * keeps the entries it holds from being reclaimed, and the reclaim of entries other consumers left
 * behind: at once those of consumers known to be dead, else those idle past the visibility timeout
 * (`XAUTOCLAIM`).
 */
export class GroupMembership {
  readonly #deps: MembershipDeps;

  constructor(deps: MembershipDeps) {
    this.#deps = deps;
  }

  /** Registers the consumer: the stream and its group, the heartbeat and, for a topic, the subscription. */
  join(): Promise<unknown> {
    const { redis, lane, consumer } = this.#deps;
    return runScript(
      redis,
      JOIN,
      [lane.stream, lane.consumers, lane.subscriptions ?? lane.stream],
      [GROUP, consumer, lane.subscription === undefined ? "" : escapeSubscription(lane.subscription)],
    );
  }

  /** Refreshes the heartbeat and the idle time of `held`, so no other consumer reclaims them. */
  async touch(held: Iterable<string>): Promise<void> {
    const { redis, lane, consumer } = this.#deps;
    try {
      await runScript(redis, TOUCH, [lane.stream, lane.consumers], [GROUP, consumer, ...held]);
    } catch (error) {
      this.#deps.logger.debug("redis heartbeat failed", {
        destination: lane.destination,
        error: errorText(error),
      });
    }
  }

  /**
   * Claims up to `room()` entries of dead consumers, then of consumers silent past the visibility
   * timeout, handing them to `accept`; then forgets consumers that went silent.
   */
  async reclaim(room: () => number, accept: (entries: StreamEntries) => void): Promise<void> {
    const { redis, lane, consumer, visibilityTimeoutMs } = this.#deps;
    try {
      const dead = this.#deps.deadConsumers();
      if (dead.length > 0 && room() > 0) {
        accept(
          await runScript<StreamEntries>(
            redis,
            CLAIM_DEAD,
            [lane.stream],
            [GROUP, consumer, room(), ...dead],
          ),
        );
      }
      const free = room();
      if (free > 0) {
        const reply = (await redis.xautoclaim(
          lane.stream,
          GROUP,
          consumer,
          visibilityTimeoutMs,
          "0-0",
          "COUNT",
          free,
        )) as [string, StreamEntries, string[]?];
        accept(reply[1] ?? []);
      }
      await runScript(redis, REAP, [lane.stream, lane.consumers], [GROUP, visibilityTimeoutMs, consumer]);
    } catch (error) {
      const text = errorText(error);
      if (!text.includes("NOGROUP")) {
        this.#deps.logger.debug("redis reclaim pass failed", { destination: lane.destination, error: text });
      }
    }
  }

  /** The entries this consumer holds pending, as far as Redis knows (up to 1000). */
  async pending(): Promise<StreamEntries> {
    const { redis, lane, consumer } = this.#deps;
    return entriesOf(
      await redis.xreadgroup("GROUP", GROUP, consumer, "COUNT", 1_000, "STREAMS", lane.stream, "0"),
    );
  }

  /** Unregisters the consumer; it stays in the group while it still holds entries. */
  leave(): Promise<unknown> {
    const { redis, lane, consumer } = this.#deps;
    return runScript(redis, LEAVE, [lane.stream, lane.consumers], [GROUP, consumer]);
  }
}
