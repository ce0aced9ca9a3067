import { sleep } from "./factflow-process.js";
import { api } from "./http.js";
import { QUEUES } from "./pipeline.js";
import { type BrokerQueue, rabbitQueues } from "./services.js";

/** What is left of an ended execution's queues. */
export interface QueueLeftovers {
  /** Messages waiting, in flight or dead-lettered in any queue of the execution (must be 0). */
  readonly messages: number;
  /** Route queues the server deleted, of `QUEUES.length`. */
  readonly deleted: number;
  /** One line per queue still present, for the report. */
  readonly details: readonly string[];
}

/** How long the queue janitor gets to delete an ended execution's queues before we look. */
const JANITOR_DEADLINE_MS = 20_000;

/**
 * Waits (bounded) for the server to delete the execution's scoped queues, then sums what every
 * queue of the execution still holds: through the API's stats for the route queues and any other
 * queue it lists under `/queue/<id>/`, and for RabbitMQ also as the broker itself reports them
 * (retry and dead-letter queues included).
 */
export async function queueLeftovers(
  base: string,
  executionId: string,
  provider: "embedded" | "rabbitmq",
): Promise<QueueLeftovers> {
  const prefix = `/queue/${executionId}/`;
  const brokerPrefix = `${executionId}:.`;
  const listed = async (): Promise<string[]> => {
    const { items } = (await api(base, "GET", "/api/v1/queues")) as { items: { destination: string }[] };
    return items.map((i) => i.destination).filter((d) => d.startsWith(prefix));
  };
  const started = Date.now();
  let present = await listed();
  let broker: BrokerQueue[] | undefined;
  for (;;) {
    broker = provider === "rabbitmq" ? await rabbitQueues(brokerPrefix) : undefined;
    const gone = present.length === 0 && (broker === undefined || broker.length === 0);
    if (gone || Date.now() - started > JANITOR_DEADLINE_MS) break;
    await sleep(500);
    present = await listed();
  }
  const destinations = new Set([...QUEUES.map((q) => `${prefix}${q}`), ...present]);
  let viaApi = 0;
  const details: string[] = [];
  for (const destination of destinations) {
    const stats = await api(
      base,
      "GET",
      `/api/v1/queues/stats?destination=${encodeURIComponent(destination)}`,
    );
    const held = stats.depth + stats.in_flight + stats.dlq_depth;
    viaApi += held;
    if (held > 0 || present.includes(destination)) {
      details.push(
        `${destination.slice(prefix.length)}: depth ${stats.depth}, in flight ${stats.in_flight}, dlq ${stats.dlq_depth}, consumers ${stats.consumers}`,
      );
    }
  }
  if (broker === undefined) {
    return {
      messages: viaApi,
      deleted: QUEUES.filter((q) => !present.includes(`${prefix}${q}`)).length,
      details,
    };
  }
  // RabbitMQ: the broker's own view (every queue of the execution, retry and dead-letter queues
  // included) wins; the API only knows what this process declared.
  const names = new Set(broker.map((q) => q.name));
  let messages = 0;
  for (const q of broker) {
    messages += q.messages + q.unacked;
    details.push(`broker ${q.name}: messages ${q.messages}, unacked ${q.unacked}, consumers ${q.consumers}`);
  }
  const deleted = QUEUES.filter((q) => !names.has(`${brokerPrefix}${q}`)).length;
  return { messages: Math.max(messages, viaApi), deleted, details };
}

/**
 * Deletes whatever is left of the execution's route queues (messages and dead letters included), so
 * a failed scenario does not leave messages on a shared broker. Returns how many queues went.
 */
export async function removeLeftovers(base: string, executionId: string): Promise<number> {
  let removed = 0;
  for (const queue of QUEUES) {
    const result = await api(base, "POST", "/api/v1/queues/delete", {
      destination: `/queue/${executionId}/${queue}`,
      if_empty: false,
      keep_dead_letters: false,
    });
    if (result.deleted === true) removed++;
  }
  return removed;
}
