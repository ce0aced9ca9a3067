import { errorText, type Logger } from "@factflow/protocols";
import type { Redis } from "ioredis";
import { GROUP } from "./naming.js";
import { type ReadWindowState, readCount } from "./read-window.js";
import { sleep } from "./timing.js";

/** Entries of one stream in an XREADGROUP / XAUTOCLAIM reply; deleted entries have no fields. */
export type StreamEntries = readonly (readonly [string, string[] | null])[];

/** What a {@link ReadLoop} reads from and hands its entries to. */
export interface ReadLoopOptions {
  /** The subscription's own connection, blocked in `XREADGROUP` most of the time. */
  readonly reader: Redis;
  readonly stream: string;
  readonly consumer: string;
  readonly blockMs: number;
  readonly destination: string;
  readonly logger: Logger;
  /** The subscription's window now: its prefetch and concurrency, and what it holds. */
  readonly window: () => Omit<ReadWindowState, "refilling">;
  /** Registers the consumer again (the stream was deleted under it). */
  readonly rejoin: () => Promise<unknown>;
  /** Takes the entries read; `redelivered` when they were handed out before. */
  readonly accept: (entries: StreamEntries, redelivered: boolean) => void;
}

/**
 * The read loop of one consumer: a blocking `XREADGROUP` for new entries, as many as the window
 * allows (`readCount`), waiting for {@link wake} while it allows none. After a failed read it reads
 * its own pending list back first, since a reply lost with the connection may have assigned entries
 * to it.
 */
export class ReadLoop {
  readonly #options: ReadLoopOptions;
  #stopped = false;
  #waiter: (() => void) | undefined;
  /** True once the window was full since the last read (see `readCount`). */
  #refilling = false;
  #done: Promise<void> = Promise.resolve();

  constructor(options: ReadLoopOptions) {
    this.#options = options;
  }

  start(): void {
    this.#done = this.#run();
  }

  /** Lets the loop decide again, if it waits for room in the window. */
  wake(): void {
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.();
  }

  /** Stops reading (the read in flight is cut with the reader's connection); resolves once the loop ended. */
  stop(): Promise<void> {
    this.#stopped = true;
    this.#options.reader.disconnect();
    this.wake();
    return this.#done;
  }

  async #run(): Promise<void> {
    const { reader, stream, consumer, blockMs, logger } = this.#options;
    let recoverOwn = false;
    let backoff = 100;
    while (!this.#stopped) {
      const window = this.#options.window();
      const free = readCount({ ...window, refilling: this.#refilling });
      if (free === 0) {
        if (window.unsettled >= window.prefetch) this.#refilling = true;
        await new Promise<void>((resolve) => {
          this.#waiter = resolve;
        });
        continue;
      }
      try {
        if (recoverOwn) {
          const reply = await unlessClosed(
            reader,
            reader.xreadgroup("GROUP", GROUP, consumer, "COUNT", window.prefetch, "STREAMS", stream, "0"),
          );
          recoverOwn = false;
          this.#options.accept(entriesOf(reply), true);
        } else {
          const reply = await unlessClosed(
            reader,
            reader.xreadgroup(
              "GROUP",
              GROUP,
              consumer,
              "COUNT",
              free,
              "BLOCK",
              blockMs,
              "STREAMS",
              stream,
              ">",
            ),
          );
          this.#options.accept(entriesOf(reply), false);
          this.#refilling = false;
        }
        backoff = 100;
      } catch (error) {
        if (this.#stopped) break;
        const text = errorText(error);
        if (text.includes("NOGROUP")) {
          // The stream was deleted under us: register again (an empty stream and group).
          await this.#options.rejoin().catch(() => undefined);
        } else {
          recoverOwn = true;
          logger.warn("redis read failed; reading again after reconnecting", {
            destination: this.#options.destination,
            error: text,
          });
        }
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 2_000);
      }
    }
  }
}

/**
 * `read`, or a rejection as soon as the reader's connection closes. The reader does not resend
 * commands cut off by a lost connection (`autoResendUnfulfilledCommands: false`), and ioredis then
 * drops them on reconnect without settling their promises: without this, a blocking read in flight
 * at the moment of a cut would never return and the subscription would stop reading for good.
 */
function unlessClosed<T>(reader: Redis, read: Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onClose = () => reject(new Error("the reader connection closed during a read"));
    reader.once("close", onClose);
    read.then(
      (value) => {
        reader.off("close", onClose);
        resolve(value);
      },
      (error: unknown) => {
        reader.off("close", onClose);
        reject(error);
      },
    );
  });
}

/** The entries of the one stream an XREADGROUP reply covers. */
export function entriesOf(reply: unknown): StreamEntries {
  if (!Array.isArray(reply) || reply.length === 0) return [];
  const first = reply[0] as [string, StreamEntries] | undefined;
  return first?.[1] ?? [];
}
