import { close as closeFd, openSync, readSync } from "node:fs";
import { type Logger, ProviderError } from "@factflow/protocols";
import { classifyError } from "./classify-error.js";
import type { EmbeddedConfig } from "./config.js";
import { PROVIDER_NAME } from "./errors.js";
import { emptyReadAhead, type Journal, type ReadAhead } from "./journal.js";
import { type JournalTimers, type LogFile, nodeTimers } from "./log-file.js";
import type { MessageContent, StoredMessage } from "./message.js";
import type { QueueDefinition } from "./queue-options.js";
import { decodeContent, encodeMessage, encodeRecord, frame, LOG_MAGIC } from "./record-codec.js";

interface Waiter {
  resolve(): void;
  reject(error: unknown): void;
}

/** What the file journal has done since it opened. */
export interface JournalStats {
  /** Group commits (one write + one fsync each). */
  commits: number;
  records: number;
  compactions: number;
  /** Current size of the log file. */
  logBytes: number;
}

/** The live state to write when compacting. */
export interface Snapshot {
  /** Record payloads, and live messages (encoded by the journal, paged-out ones read back first). */
  records: Iterable<string | StoredMessage>;
  liveBytes: number;
  liveCount: number;
  /**
   * Called once the compacted log has replaced the old one and before the old one is let go: every
   * live message written by this compaction moves its `nextLogOffset` to `logOffset`.
   */
  relocated?(): void;
}

export type SnapshotSource = () => Snapshot;

/** How much of the log one read brings in when a paged-out message is read back. */
const READ_AHEAD_BYTES = 256 * 1024;

/** Logs smaller than this are never compacted while running: replaying them costs next to nothing. */
const MIN_COMPACT_BYTES = 1024 * 1024;

/**
 * At close the floor is lower: a compaction mid-drain can leave a few hundred KB of acknowledgements
 * behind it, and close is the one moment rewriting a tiny live set costs nobody anything.
 */
const MIN_COMPACT_BYTES_AT_CLOSE = 64 * 1024;

/**
 * The file mode's journal: records are gathered for `groupCommitMs` (or until `groupCommitMaxBytes`),
 * written with one `write` and made durable with one `fdatasync`, and only then are the waiting
 * publishes resolved. While one batch is being synced the next one gathers, so the disk is never idle
 * under load and no single publish pays for more than about two syncs.
 *
 * The one invariant that keeps it live: whenever a record is pending, either a flush is running and
 * will look at the pending list again before it ends, or a wake-up is armed. A record pushed by a
 * waiter's continuation, after the flush loop has looked for the last time but before it has ended,
 * is picked up by the check in {@link FileJournal.#startFlush}'s `finally`.
 */
export class FileJournal implements Journal {
  readonly durable = true;
  readonly stats: JournalStats;
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  /** Messages whose publish records are pending; their offsets are relative to the batch until written. */
  #placed: StoredMessage[] = [];
  /** Descriptor the content of paged-out messages is read from: the log as the offsets know it. */
  #readFd: number | undefined;
  /** Counts the logs compaction put in place, so a read-ahead of an older one is not used. */
  #generation = 0;
  #waiters: Waiter[] = [];
  #cancelWakeUp: (() => void) | undefined;
  #flushing: Promise<void> | undefined;
  #failed: ProviderError | undefined;
  #closed = false;

  constructor(
    private readonly path: string,
    private readonly file: LogFile,
    logBytes: number,
    private readonly config: EmbeddedConfig,
    private readonly snapshot: SnapshotSource,
    private readonly logger: Logger,
    private readonly timers: JournalTimers = nodeTimers,
  ) {
    this.stats = { commits: 0, records: 0, compactions: 0, logBytes };
  }

  publish(messages: readonly StoredMessage[]): Promise<void> {
    const refused = this.#refusal();
    if (refused !== undefined) return refused;
    if (messages.length === 0) return Promise.resolve();
    for (const message of messages) {
      // The frame lands at this offset within the batch; the batch's own offset is added when it is
      // written. Its copy follows it (see record-codec.ts).
      const buffer = frame(encodeMessage(message));
      message.logOffset = this.#pendingBytes;
      message.logLength = buffer.length;
      this.#enqueueFrame(buffer);
      this.#pending.push(buffer);
      this.#pendingBytes += buffer.length;
      this.#placed.push(message);
    }
    return this.#committed();
  }

  /**
   * Reads the content of a paged-out message back from its publish record. Synchronous, so that a
   * delivery never waits for the event loop: a read brings in {@link READ_AHEAD_BYTES} of the log,
   * which holds the records of the messages published after it, the ones delivered next.
   */
  readContent(message: StoredMessage, readAhead: ReadAhead): MessageContent {
    const start = message.logOffset;
    const end = start + message.logLength;
    if (
      readAhead.generation !== this.#generation ||
      start < readAhead.start ||
      end > readAhead.start + readAhead.data.length
    ) {
      const size = Math.max(message.logLength, READ_AHEAD_BYTES);
      let buffer = readAhead.backing;
      if (buffer === undefined || buffer.length < size) {
        buffer = Buffer.allocUnsafeSlow(size);
        readAhead.backing = buffer;
      }
      const filled = this.#readAt(buffer, size, start);
      if (filled < message.logLength) {
        throw new Error(
          `the queue log ${this.path} ends at byte ${start + filled}, before the record of message ${message.seq}`,
        );
      }
      readAhead.start = start;
      readAhead.data = buffer.subarray(0, filled);
      readAhead.generation = this.#generation;
    }
    const from = start - readAhead.start;
    try {
      return decodeContent(readAhead.data.subarray(from, from + message.logLength), message.seq);
    } catch (error) {
      const copy = this.#readCopy(message);
      if (copy === undefined) throw error;
      this.logger.error(
        `[factflow/embedded] the record of message ${message.seq} in the queue log ${this.path} is damaged; its copy was read instead`,
        { path: this.path, offset: start, error: (error as Error).message },
      );
      return copy;
    }
  }

  /** The content of `message` from the copy of its publish record, or undefined if that is unreadable. */
  #readCopy(message: StoredMessage): MessageContent | undefined {
    try {
      const buffer = Buffer.allocUnsafe(message.logLength);
      const filled = this.#readAt(buffer, buffer.length, message.logOffset + message.logLength);
      return filled < buffer.length ? undefined : decodeContent(buffer, message.seq);
    } catch {
      return undefined;
    }
  }

  /** Reads up to `size` bytes of the log at `position` into `buffer`; fewer only at its end. */
  #readAt(buffer: Buffer, size: number, position: number): number {
    this.#readFd ??= openSync(this.path, "r");
    let filled = 0;
    while (filled < size) {
      const n = readSync(this.#readFd, buffer, filled, size - filled, position + filled);
      if (n === 0) break;
      filled += n;
    }
    return filled;
  }

  ack(message: StoredMessage): void {
    this.#push(`{"t":"a","s":${message.seq}}`);
  }

  retry(message: StoredMessage): void {
    this.#push(
      encodeRecord(
        message.lastError === undefined
          ? { t: "r", s: message.seq, a: message.attempt, nb: message.notBefore }
          : { t: "r", s: message.seq, a: message.attempt, nb: message.notBefore, le: message.lastError },
      ),
    );
  }

  deadLetter(message: StoredMessage): void {
    const dead = message.dead;
    if (dead === undefined) return;
    const record = { t: "d" as const, s: message.seq, r: dead.reason, at: dead.at, n: dead.attempts };
    this.#push(encodeRecord(dead.lastError === undefined ? record : { ...record, le: dead.lastError }));
  }

  redrive(messages: readonly StoredMessage[]): Promise<void> {
    return this.#appendAndWait(messages.map((message) => `{"t":"v","s":${message.seq}}`));
  }

  discard(message: StoredMessage): Promise<void> {
    return this.#appendAndWait([`{"t":"x","s":${message.seq}}`]);
  }

  define(queueKey: string, definition: QueueDefinition): Promise<void> {
    return this.#appendAndWait([encodeRecord({ t: "q", q: queueKey, o: definition })]);
  }

  subscribe(queueKey: string): Promise<void> {
    return this.#appendAndWait([encodeRecord({ t: "s", q: queueKey })]);
  }

  /** Opens the descriptor paged-out messages are read from (the log as recovered). */
  openReader(): void {
    this.#readFd ??= openSync(this.path, "r");
  }

  /** Commits everything still pending, then closes the file. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#cancelWakeUp?.();
    this.#cancelWakeUp = undefined;
    while (this.#pending.length > 0 || this.#flushing !== undefined) {
      if (this.#failed !== undefined) break;
      await (this.#flushing ?? this.#startFlush());
    }
    // Leave a short log behind, so the next start does not replay what is long dead.
    if (this.#failed === undefined && this.#shouldCompact(true)) {
      await this.#compact().catch((error: unknown) =>
        this.logger.warn("[factflow/embedded] log compaction at close failed; the log stays as it is", {
          path: this.path,
          error: classifyError(error, "compacting the queue log").message,
        }),
      );
    }
    await this.file.close().catch(() => undefined);
    await this.#closeReader();
  }

  /**
   * Lets go of the reader's descriptor on libuv's thread pool. After a compaction it is the last
   * descriptor of the replaced log, and closing it frees that file's blocks: for a log of tens of MB
   * the kernel takes tens of milliseconds, which `closeSync` spent on the event loop.
   */
  #closeReader(): Promise<void> {
    const fd = this.#readFd;
    if (fd === undefined) return Promise.resolve();
    this.#readFd = undefined;
    // Nothing to do about a descriptor that will not close.
    return new Promise((resolve) => closeFd(fd, () => resolve()));
  }

  #push(json: string): void {
    // After close nothing more reaches the file: a settlement record that misses the log means a
    // redelivery after restart, never a loss.
    if (this.#failed !== undefined || this.#closed) return;
    this.#enqueue(json);
    this.#wake();
  }

  #enqueue(json: string): void {
    this.#enqueueFrame(frame(json));
  }

  #enqueueFrame(buffer: Buffer): void {
    this.#pending.push(buffer);
    this.#pendingBytes += buffer.length;
    this.stats.records++;
  }

  /**
   * Queues `records` and a waiter for the commit that holds them, in that order and before anything
   * can start a flush: a flush takes the pending records and the waiters together, so a waiter
   * registered after a flush had already taken its records (a batch that reached
   * `groupCommitMaxBytes` starts one at once) would wait for a commit that never comes when nothing
   * else is written afterwards.
   */
  #appendAndWait(records: readonly string[]): Promise<void> {
    const refused = this.#refusal();
    if (refused !== undefined) return refused;
    if (records.length === 0) return Promise.resolve();
    for (const record of records) this.#enqueue(record);
    return this.#committed();
  }

  /** Why nothing more can be appended, as the rejection to return, or undefined. */
  #refusal(): Promise<void> | undefined {
    if (this.#failed !== undefined) return Promise.reject(this.#failed);
    if (this.#closed) {
      return Promise.reject(
        new ProviderError(
          PROVIDER_NAME,
          "closed",
          `the queue log ${this.path} is closed; nothing more is written`,
        ),
      );
    }
    return undefined;
  }

  /** A waiter for the commit of what is pending now (see {@link FileJournal.#appendAndWait}). */
  #committed(): Promise<void> {
    const committed = new Promise<void>((resolve, reject) => this.#waiters.push({ resolve, reject }));
    this.#wake();
    return committed;
  }

  /** Makes sure the pending records will be written: a running flush takes them, or a wake-up is armed. */
  #wake(): void {
    if (this.#flushing !== undefined || this.#pending.length === 0) return;
    if (this.#pendingBytes >= this.config.groupCommitMaxBytes) {
      this.#cancelWakeUp?.();
      this.#cancelWakeUp = undefined;
      void this.#startFlush();
    } else if (this.#cancelWakeUp === undefined) {
      this.#cancelWakeUp = this.timers.schedule(() => {
        this.#cancelWakeUp = undefined;
        void this.#startFlush();
      }, this.config.groupCommitMs);
    }
  }

  #startFlush(): Promise<void> {
    this.#flushing ??= this.#flushLoop().finally(() => {
      this.#flushing = undefined;
      // The loop ends once it finds nothing pending, but resolving its waiters lets their
      // continuations run before this point, and they may have pushed again while the loop still
      // counted as running. Without this wake-up such a record waits for an unrelated write.
      if (!this.#closed) this.#wake();
    });
    return this.#flushing;
  }

  async #flushLoop(): Promise<void> {
    while (this.#pending.length > 0 && this.#failed === undefined) {
      const buffers = this.#pending;
      const waiters = this.#waiters;
      const size = this.#pendingBytes;
      const placed = this.#placed;
      this.#pending = [];
      this.#waiters = [];
      this.#pendingBytes = 0;
      this.#placed = [];
      // The log is appended to: this batch starts where it ends now.
      const base = this.stats.logBytes;
      for (const message of placed) message.logOffset += base;
      try {
        await this.file.append(buffers);
        if (this.config.fsync) await this.file.sync();
        this.stats.commits++;
        this.stats.logBytes += size;
        for (const waiter of waiters) waiter.resolve();
      } catch (error) {
        // A log we could not append to cannot be trusted for later records either: fail every
        // waiting and future publish loudly rather than acknowledge what may not be on disk.
        this.#failed = classifyError(error, `appending to the queue log ${this.path}`);
        this.logger.error(
          "[factflow/embedded] queue log write failed; the provider rejects further publishes",
          {
            path: this.path,
            error: this.#failed.message,
          },
        );
        for (const waiter of [...waiters, ...this.#waiters]) waiter.reject(this.#failed);
        this.#waiters = [];
        this.#pending = [];
        this.#placed = [];
        return;
      }
      if (this.#shouldCompact()) {
        try {
          await this.#compact();
        } catch (error) {
          this.logger.warn("[factflow/embedded] log compaction failed; the current log stays in use", {
            path: this.path,
            error: classifyError(error, "compacting the queue log").message,
          });
        }
      }
    }
  }

  /**
   * Past `compactAfterBytes`, compact when at least half the log is dead. Below it, compact a log of
   * at least 1 MiB once it is almost all dead (16 times its live set): after an execution ends its
   * acknowledged messages are pure dead weight, and waiting for the big threshold kept tens of MB to
   * be replayed at every start for one live message. At close the floor is 64 KiB.
   */
  #shouldCompact(closing = false): boolean {
    if (this.#closed && !closing) return false;
    const { logBytes } = this.stats;
    const big = logBytes > this.config.compactAfterBytes;
    if (!big && logBytes <= (closing ? MIN_COMPACT_BYTES_AT_CLOSE : MIN_COMPACT_BYTES)) return false;
    const { liveBytes, liveCount } = this.snapshot();
    // What a compacted copy takes: each live message's record, with its copy.
    const live = 2 * (liveBytes + liveCount * 256);
    return big ? logBytes > 2 * live : logBytes > 16 * live;
  }

  /**
   * Rewrites the live set into a new file and renames it over the log. Publishes committed by the
   * batch just synced are adopted by the broker in promise continuations; waiting one macrotask lets
   * them run, so the snapshot cannot miss a message whose publish has already resolved.
   */
  async #compact(): Promise<void> {
    await new Promise<void>((resolve) => this.timers.schedule(resolve, 0));
    const snapshot = this.snapshot();
    let size = 0;
    // The copy is written as it is encoded, a chunk at a time, so compacting never holds the whole
    // live set encoded in memory. Settlements made meanwhile are appended after the copy.
    const readAhead = emptyReadAhead();
    const self = this;
    function* framed(): Generator<Buffer> {
      size = LOG_MAGIC.length;
      yield LOG_MAGIC;
      for (const item of snapshot.records) {
        if (typeof item === "string") {
          const buffer = frame(item);
          size += buffer.length;
          yield buffer;
          continue;
        }
        const buffer = frame(
          encodeMessage(item.resident ? item : { ...item, ...self.readContent(item, readAhead) }),
        );
        item.nextLogOffset = size;
        item.nextLogLength = buffer.length;
        size += 2 * buffer.length;
        yield buffer;
        yield buffer;
      }
    }
    await this.file.replace(framed());
    // Reads of paged-out messages used the old log up to here; from now on the new one.
    snapshot.relocated?.();
    const reading = this.#readFd !== undefined;
    void this.#closeReader();
    this.#generation++;
    if (reading) this.openReader();
    const before = this.stats.logBytes;
    this.stats.logBytes = size;
    this.stats.compactions++;
    this.logger.info("[factflow/embedded] compacted the queue log", { path: this.path, before, after: size });
  }
}
