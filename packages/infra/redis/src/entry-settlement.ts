import type { SettlementCopy } from "@factflow/provider-kit";
import type { Redis } from "ioredis";
import { AckBatcher } from "./ack-batch.js";
import type { RawEntry } from "./codec.js";
import { corkUntilNextTurn } from "./connections.js";
import type { DelayedPump } from "./delayed-pump.js";
import { GROUP, type LaneKeys } from "./naming.js";
import { nonce, runScript, SETTLE, SETTLE_ACKS, settleAcksArgs } from "./scripts.js";
import { sleep } from "./timing.js";

/** How long a settlement is sent again while Redis is unreachable once the subscription stops. */
const GIVE_UP_AFTER_STOP_MS = 2_000;

/** One delivered stream entry. */
export interface Entry {
  readonly entryId: string;
  readonly raw: RawEntry;
}

/** What settling a consumer's entries needs. */
export interface EntrySettlementDeps {
  /** The shared command connection. */
  readonly redis: Redis;
  readonly lane: LaneKeys;
  readonly consumer: string;
  readonly pump: DelayedPump;
  /** Whether an error is worth sending the settlement again (Redis unreachable, a timeout). */
  readonly retryable: (error: unknown) => boolean;
  /** When the subscription started to stop (ms since epoch), if it did. */
  readonly stoppedAt: () => number | undefined;
}

/**
 * The scripts that settle one consumer's entries, each only if this consumer still holds the entry
 * (Redis answers that, so a reclaimed entry's settlement is refused rather than doubled): the
 * acknowledgements of one event-loop turn as one `SETTLE_ACKS` call, and a retry, dead-letter or
 * hand-back copy written by the same `SETTLE` call as the XACK of its original.
 */
export class EntrySettlement {
  readonly #deps: EntrySettlementDeps;
  readonly #acks: AckBatcher;

  constructor(deps: EntrySettlementDeps) {
    this.#deps = deps;
    const { redis, lane, consumer } = deps;
    this.#acks = new AckBatcher((ids) => {
      corkUntilNextTurn(redis);
      return runScript<number[]>(redis, SETTLE_ACKS, [lane.stream], settleAcksArgs(GROUP, consumer, ids));
    });
  }

  /** Acknowledges the entry; false when another consumer holds it now. */
  async ack(entry: Entry): Promise<boolean> {
    return settledNow(await this.#resent(() => this.#acks.ack(entry.entryId)));
  }

  /** Puts a copy flagged redelivered at the tail of the stream in place of the entry. */
  async handBack(entry: Entry, resend = true): Promise<boolean> {
    const back = () => this.#settle(entry, "back", this.#deps.lane.stream, entry.raw.headersJson);
    return settledNow(await (resend ? this.#resent(back) : back()));
  }

  /** Writes the retry (to the delayed set when it waits) or dead-letter copy in place of the entry. */
  async copy(entry: Entry, copy: SettlementCopy): Promise<"settled" | "superseded"> {
    const { lane, pump } = this.#deps;
    const headersJson = JSON.stringify(copy.headers);
    const delayMs = copy.kind === "retry" ? copy.verdict.delayMs : 0;
    const code =
      copy.kind === "dead"
        ? await this.#settle(entry, "add", lane.dlq, headersJson)
        : delayMs > 0
          ? await this.#settle(entry, "delay", lane.delayed, headersJson, delayMs)
          : await this.#settle(entry, "add", lane.stream, headersJson);
    if (!settledNow(code)) return "superseded";
    if (delayMs > 0) pump.wakeIn(delayMs);
    return "settled";
  }

  #settle(
    entry: Entry,
    mode: "add" | "back" | "delay",
    target: string,
    headersJson: string,
    delayMs = 0,
  ): Promise<number> {
    const { redis, lane, consumer } = this.#deps;
    const args = [GROUP, consumer, entry.entryId, mode, headersJson, entry.raw.bodyJson, delayMs, nonce()];
    return runScript<number>(redis, SETTLE, [lane.stream, target], args);
  }

  /**
   * Sends an idempotent settlement again while Redis is unreachable (once it ran, the entry is no
   * longer pending and a resend does nothing); rethrows any other error, or a failure past
   * {@link GIVE_UP_AFTER_STOP_MS} into a stop: the entry then stays pending and is reclaimed after
   * the visibility timeout.
   */
  async #resent<T>(send: () => Promise<T>): Promise<T> {
    let backoff = 100;
    for (;;) {
      try {
        return await send();
      } catch (error) {
        const stoppedAt = this.#deps.stoppedAt();
        const late = stoppedAt !== undefined && Date.now() > stoppedAt + GIVE_UP_AFTER_STOP_MS;
        if (late || !this.#deps.retryable(error)) throw error;
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 2_000);
      }
    }
  }
}

/** SETTLE's answer: 1 settled now, 2 settled before (a resend after a lost reply); else not held. */
function settledNow(code: number): boolean {
  return code === 1 || code === 2;
}
