import type { MessageContent, StoredMessage } from "./message.js";
import type { QueueDefinition } from "./queue-options.js";

/**
 * The last stretch of the log a queue read while paging messages back in: the records after the one
 * asked for usually belong to the messages delivered next, so one read serves many of them.
 */
export interface ReadAhead {
  start: number;
  data: Buffer;
  /** The log file the bytes came from (compaction replaces it). */
  generation: number;
  /** The memory `data` is read into, reused by the next read (content is copied out of it). */
  backing: Buffer | undefined;
}

export function emptyReadAhead(): ReadAhead {
  return { start: 0, data: Buffer.alloc(0), generation: -1, backing: undefined };
}

/**
 * Where the broker records what happened. The memory mode records nothing; the file mode appends to
 * the log. Promises resolve once the record is durable; the `void` methods are group-committed with
 * the next batch and nobody waits for them (a crash before that batch means redelivery, never loss).
 */
export interface Journal {
  readonly durable: boolean;
  publish(messages: readonly StoredMessage[]): Promise<void>;
  ack(message: StoredMessage): void;
  retry(message: StoredMessage): void;
  deadLetter(message: StoredMessage): void;
  redrive(messages: readonly StoredMessage[]): Promise<void>;
  discard(message: StoredMessage): Promise<void>;
  define(queueKey: string, definition: QueueDefinition): Promise<void>;
  subscribe(queueKey: string): Promise<void>;
  /** Reads the content of a paged-out message back from its publish record (file mode only). */
  readContent(message: StoredMessage, readAhead: ReadAhead): MessageContent;
  close(): Promise<void>;
}

const resolved = Promise.resolve();

/** The memory mode's journal: nothing to write, everything "durable" at once. */
export const memoryJournal: Journal = {
  durable: false,
  publish: () => resolved,
  ack() {},
  retry() {},
  deadLetter() {},
  redrive: () => resolved,
  discard: () => resolved,
  define: () => resolved,
  subscribe: () => resolved,
  readContent() {
    throw new Error("[factflow/embedded] the memory mode never pages messages out");
  },
  close: () => resolved,
};
