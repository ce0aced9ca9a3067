import { type DeadLetterSource, Headers, type QueueAdminProtocol } from "@factflow/protocols";
import { envelopeFromHeaders, parseAttempt, redriveHeaders } from "@factflow/provider-kit";
import type { Stored, WalkthroughBroker } from "./broker.js";
import { queueKey } from "./naming.js";

/** The admin API over the broker's queues. */
export function createAdmin(broker: WalkthroughBroker): QueueAdminProtocol {
  const existing = (source: DeadLetterSource) =>
    broker.queues.get(queueKey(source.destination, source.subscription));
  const idOf = (message: Stored) => message.headers[Headers.messageId];
  const redrive = (source: DeadLetterSource, pick: (message: Stored) => boolean) => {
    const queue = existing(source);
    const moved = queue?.dead.filter(pick) ?? [];
    for (const message of moved) {
      queue?.dead.splice(queue.dead.indexOf(message), 1);
      queue?.send({ headers: redriveHeaders(message.headers), body: message.body, redelivered: false }, 0);
    }
    return moved.length;
  };
  return {
    async listDestinations() {
      const queues = [...broker.queues].filter(([key, q]) => !key.includes("#") && !q.gone);
      return [
        ...queues.map(([destination]) => ({ destination, kind: "queue" as const })),
        ...[...broker.topics].map(([destination, subs]) => ({
          destination,
          kind: "topic" as const,
          subscriptions: [...subs],
        })),
      ];
    },
    async stats(source) {
      const queue = existing(source);
      return {
        destination: source.destination,
        ...(source.subscription === undefined ? {} : { subscription: source.subscription }),
        depth: (queue?.ready.length ?? 0) + (queue?.timers.size ?? 0),
        consumers: queue?.consumers.length ?? 0,
        inFlight: queue?.inFlight ?? 0,
        dlqDepth: queue?.dead.length ?? 0,
      };
    },
    async browseDeadLetters(source, { offset, limit }) {
      const dead = existing(source)?.dead ?? [];
      const items = dead.slice(offset, offset + limit).map((letter) => {
        const { envelope } = envelopeFromHeaders({ ...letter.headers }, JSON.parse(letter.body));
        const lastError = letter.headers[Headers.lastError];
        return {
          message: envelope,
          reason: letter.headers[Headers.deadLetterReason] ?? "unknown",
          attempts: parseAttempt(letter.headers[Headers.deliveryAttempt]),
          deadLetteredAt: letter.headers[Headers.deadLetteredAt] ?? envelope.publishedAt,
          ...(lastError === undefined ? {} : { lastError }),
        };
      });
      return { total: dead.length, offset, items };
    },
    redriveAll: async (source) => ({ redriven: redrive(source, () => true) }),
    redriveOne: async (source, id) => ({ redriven: redrive(source, (m) => idOf(m) === id) === 1 }),
    async discardOne(source, id) {
      const dead = existing(source)?.dead ?? [];
      const index = dead.findIndex((m) => idOf(m) === id);
      if (index >= 0) dead.splice(index, 1);
      return { discarded: index >= 0 };
    },
    async deleteDestination(source, options = {}) {
      const key = queueKey(source.destination, source.subscription);
      const queue = broker.queues.get(key);
      const keep = options.keepDeadLetters !== false;
      if (queue === undefined || (queue.gone && keep))
        return { deleted: false, reason: "unknown destination" };
      if (queue.consumers.length > 0) return { deleted: false, reason: "consumers attached" };
      if (options.ifEmpty === true && queue.ready.length + queue.timers.size + queue.inFlight > 0)
        return { deleted: false, reason: "not empty: messages waiting" };
      for (const timer of queue.timers) clearTimeout(timer);
      queue.timers.clear();
      queue.ready = [];
      broker.topics.get(source.destination)?.delete(source.subscription ?? "");
      const kept = keep ? queue.dead.length : 0;
      if (kept > 0) queue.gone = true;
      else broker.queues.delete(key);
      return { deleted: true, deadLettersKept: kept };
    },
  };
}
