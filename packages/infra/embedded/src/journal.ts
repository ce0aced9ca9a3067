import type { StoredMessage } from "./message.js";
import type { QueueDefinition } from "./queue-options.js";

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
  close: () => resolved,
};
