import {
  type DeadLetter,
  type DeadLetterSource,
  type DeleteDestinationOptions,
  type DeleteDestinationResult,
  type DestinationInfo,
  Headers,
  type QueueAdminProtocol,
  TOPIC_PREFIX,
} from "@factflow/protocols";
import type { Broker } from "./broker.js";
import { invalidInput } from "./errors.js";
import { type StoredMessage, toEnvelope } from "./message.js";
import { queueKey, resolveTarget, validateSubscriptionName } from "./naming.js";
import type { PhysicalQueue } from "./physical-queue.js";

/** The physical queues a source addresses (none when nothing was ever published or subscribed there). */
function queuesOf(broker: Broker, source: DeadLetterSource, needOne: boolean): PhysicalQueue[] {
  if (typeof source !== "object" || source === null) {
    throw invalidInput("invalid_argument", 'admin calls take a source like { destination: "/queue/orders" }');
  }
  const target = resolveTarget(source.destination);
  if (target.kind === "queue") {
    if (source.subscription !== undefined) validateSubscriptionName(source.subscription);
    const queue = broker.queues.get(queueKey(target.name));
    return queue === undefined ? [] : [queue];
  }
  const subs = broker.topics.get(target.name);
  if (source.subscription === undefined) {
    if (needOne) {
      throw invalidInput(
        "invalid_argument",
        `dead letters of topic ${target.destination} are kept per subscription: pass { destination, subscription }`,
      );
    }
    return subs === undefined ? [] : [...subs.values()];
  }
  const queue = subs?.get(validateSubscriptionName(source.subscription));
  return queue === undefined ? [] : [queue];
}

function toDeadLetter(queue: PhysicalQueue, m: StoredMessage): DeadLetter {
  const dead = m.dead ?? {
    reason: "unknown",
    at: m.publishedAt,
    attempts: m.attempt,
    lastError: m.lastError,
  };
  const extra: Record<string, string> = {
    [Headers.deadLetterReason]: dead.reason,
    [Headers.originalDestination]: queue.destination,
    [Headers.deadLetteredAt]: dead.at,
    [Headers.deliveryAttempt]: String(dead.attempts),
  };
  if (queue.subscription !== undefined) extra[Headers.originalSubscription] = queue.subscription;
  const letter = {
    message: toEnvelope(m, extra),
    reason: dead.reason,
    attempts: dead.attempts,
    deadLetteredAt: dead.at,
  };
  return dead.lastError === undefined ? letter : { ...letter, lastError: dead.lastError };
}

function findDead(queue: PhysicalQueue | undefined, messageId: string): StoredMessage | undefined {
  if (queue === undefined) return undefined;
  for (const m of queue.dead.values()) if (m.id === messageId) return m;
  return undefined;
}

function checkId(messageId: unknown): string {
  if (typeof messageId !== "string" || messageId.length === 0) {
    throw invalidInput(
      "invalid_argument",
      "messageId must be the non-empty id of a dead letter (see browseDeadLetters)",
    );
  }
  return messageId;
}

/** Describes a source for refusal reasons. */
function describeSource(source: DeadLetterSource): string {
  return source.subscription === undefined
    ? source.destination
    : `${source.destination} (subscription ${source.subscription})`;
}

/**
 * Removes a physical queue. Waiting messages are discarded (journaled like a discard); dead letters
 * live in the same physical queue here, so when they are kept the queue stays registered as their
 * holder and everything else about it (its place in topic fan-out, its definition) goes.
 */
async function deleteQueue(
  broker: Broker,
  source: DeadLetterSource,
  options: DeleteDestinationOptions,
): Promise<DeleteDestinationResult> {
  const describe = describeSource(source);
  const queue = queuesOf(broker, source, true)[0];
  if (queue === undefined) return { deleted: false, reason: `${describe} does not exist` };
  if (queue.consumers.length > 0) {
    return {
      deleted: false,
      reason: `${describe} has ${queue.consumers.length} consumer(s) attached; unsubscribe them first`,
    };
  }
  if (options.ifEmpty === true && (queue.depth > 0 || queue.inFlight > 0)) {
    return {
      deleted: false,
      reason: `${describe} is not empty: ${queue.depth} message(s) waiting, ${queue.inFlight} in flight`,
    };
  }
  if (queue.scheduled > 0) {
    // Scheduled retries are owned by timers that would put them back; let them come due first.
    return {
      deleted: false,
      reason: `${describe} has ${queue.scheduled} retr${queue.scheduled === 1 ? "y" : "ies"} scheduled; try again once they are due`,
    };
  }
  const keep = options.keepDeadLetters !== false;
  if (queue.subscription !== undefined && keep && queue.dead.size > 0) {
    // A subscription's dead letters are addressed through the subscription itself, so it stays.
    return {
      deleted: false,
      reason: `${describe} holds ${queue.dead.size} dead letter(s); redrive or discard them, or pass keepDeadLetters: false`,
      deadLettersKept: queue.dead.size,
    };
  }
  const drained: StoredMessage[] = [];
  for (let m = queue.ready.next(Number.MAX_SAFE_INTEGER); m !== undefined; ) {
    queue.release(m);
    drained.push(m);
    m = queue.ready.next(Number.MAX_SAFE_INTEGER);
  }
  for (const message of drained) await broker.discard(queue, message);
  if (!keep) for (const message of [...queue.dead.values()]) await broker.discard(queue, message);
  const kept = queue.dead.size;
  queue.definition = undefined;
  if (queue.subscription !== undefined) {
    const topic = resolveTarget(source.destination).name;
    const subs = broker.topics.get(topic);
    subs?.delete(queue.subscription);
    if (subs !== undefined && subs.size === 0) broker.topics.delete(topic);
  }
  if (kept > 0) {
    return {
      deleted: true,
      reason: `${kept} dead letter(s) kept; browse, redrive or discard them through the admin API`,
      deadLettersKept: kept,
    };
  }
  broker.queues.delete(queue.key);
  return { deleted: true, deadLettersKept: 0 };
}

/** A `now` past every delay: `ready.next(ALL)` hands out delayed messages too. */
const ALL = Number.MAX_SAFE_INTEGER;

/**
 * The admin API over the broker's own structures, so every figure is exact the moment it is read.
 * `use` is the provider's lifecycle guard: it returns the broker or throws the right error.
 */
export function createAdmin(use: (operation: string) => Broker): QueueAdminProtocol {
  return {
    async listDestinations() {
      const broker = use("admin.listDestinations");
      const out: DestinationInfo[] = [];
      for (const queue of broker.queues.values()) {
        if (!queue.isTopicSubscription) out.push({ destination: queue.destination, kind: "queue" });
      }
      for (const [topic, subs] of broker.topics) {
        out.push({ destination: `${TOPIC_PREFIX}${topic}`, kind: "topic", subscriptions: [...subs.keys()] });
      }
      return out.sort((a, b) => a.destination.localeCompare(b.destination));
    },

    async stats(source) {
      const broker = use("admin.stats");
      const queues = queuesOf(broker, source, false);
      let depth = 0;
      let consumers = 0;
      let inFlight = 0;
      let dlqDepth = 0;
      for (const queue of queues) {
        depth += queue.depth;
        consumers += queue.consumers.length;
        inFlight += queue.inFlight;
        dlqDepth += queue.dead.size;
      }
      const stats = { destination: source.destination, depth, consumers, inFlight, dlqDepth };
      return source.subscription === undefined ? stats : { ...stats, subscription: source.subscription };
    },

    async browseDeadLetters(source, page) {
      const broker = use("admin.browseDeadLetters");
      const offset = page?.offset ?? 0;
      const limit = page?.limit ?? 50;
      if (
        !Number.isInteger(offset) ||
        offset < 0 ||
        !Number.isInteger(limit) ||
        limit < 0 ||
        limit > 10_000
      ) {
        throw invalidInput("invalid_argument", "page needs an integer offset >= 0 and limit from 0 to 10000");
      }
      const queue = queuesOf(broker, source, true)[0];
      if (queue === undefined) return { total: 0, offset, items: [] };
      const items: DeadLetter[] = [];
      let index = 0;
      for (const m of queue.dead.values()) {
        if (items.length >= limit) break;
        if (index++ >= offset) items.push(toDeadLetter(queue, m));
      }
      return { total: queue.dead.size, offset, items };
    },

    async redriveAll(source) {
      const broker = use("admin.redriveAll");
      const queue = queuesOf(broker, source, true)[0];
      if (queue === undefined) return { redriven: 0 };
      const messages = [...queue.dead.values()];
      await broker.redrive(queue, messages);
      return { redriven: messages.length };
    },

    async redriveOne(source, messageId) {
      const broker = use("admin.redriveOne");
      const id = checkId(messageId);
      const queue = queuesOf(broker, source, true)[0];
      const message = findDead(queue, id);
      if (queue === undefined || message === undefined) return { redriven: false };
      await broker.redrive(queue, [message]);
      return { redriven: true };
    },

    async discardOne(source, messageId) {
      const broker = use("admin.discardOne");
      const id = checkId(messageId);
      const queue = queuesOf(broker, source, true)[0];
      const message = findDead(queue, id);
      if (queue === undefined || message === undefined) return { discarded: false };
      await broker.discard(queue, message);
      return { discarded: true };
    },

    async deleteDestination(source, options = {}) {
      return deleteQueue(use("admin.deleteDestination"), source, options);
    },

    async purgeDestination(source) {
      const broker = use("admin.purgeDestination");
      const queue = queuesOf(broker, source, true)[0];
      if (queue === undefined) return { purged: 0, reason: `${describeSource(source)} does not exist` };
      // Every waiting message, delayed ones too; in-flight messages belong to their consumer and
      // scheduled retries to their timers.
      const drained: StoredMessage[] = [];
      for (let m = queue.ready.next(ALL); m !== undefined; m = queue.ready.next(ALL)) {
        queue.release(m);
        drained.push(m);
      }
      for (const message of drained) await broker.discard(queue, message);
      return { purged: drained.length };
    },
  };
}
