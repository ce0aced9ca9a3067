import type {
  JsonValue,
  LineageProtocol,
  Logger,
  MessageEnvelope,
  PipelineConfig,
  QueueProtocol,
} from "@factflow/protocols";
import { OPEN_LINEAGE_STATUSES } from "@factflow/protocols";

/**
 * Header on a message the engine re-published on `resume` (and on every message a re-published one
 * led to). Admission treats such a delivery like a broker redelivery: it reads the message's lineage
 * row and acknowledges the copy without running the route when the message already settled for good.
 */
export const RESEED_HEADER = "x-factflow-reseeded";

/** An open `message` row of a resumed execution, re-published to its route's inbound queue. */
export interface ReseedMessage {
  readonly id: string;
  readonly route: string;
  readonly correlationId: string;
  readonly payload: JsonValue;
  readonly attempt: number;
}

/** True when the delivery is a re-seeded copy (or descends from one). */
export function isReseeded(envelope: MessageEnvelope): boolean {
  return envelope.headers[RESEED_HEADER] === "1";
}

/**
 * Every `message` row of the execution still pending or processing, with the payload lineage kept.
 * Call after a flush: it reads committed rows. Rows without a payload cannot be re-published and
 * are returned in `missing`.
 */
export async function openMessageRows(
  lineage: LineageProtocol,
  executionId: string,
): Promise<{ messages: ReseedMessage[]; missing: string[] }> {
  const messages: ReseedMessage[] = [];
  const missing: string[] = [];
  const page = 10_000;
  for (const status of OPEN_LINEAGE_STATUSES) {
    for (let offset = 0; ; offset += page) {
      const { items } = await lineage.rows(executionId, { kind: "message", status, offset, limit: page });
      for (const row of items) {
        const id = row.messageId;
        if (row.payload === undefined) missing.push(id);
        else
          messages.push({
            id,
            route: row.route,
            correlationId: row.correlationId,
            payload: row.payload,
            attempt: row.attempt,
          });
      }
      if (items.length < page) break;
    }
  }
  return { messages, missing };
}

/**
 * Re-publishes open message rows to their routes' inbound queues on the execution-scoped `queue`
 * (their rows exist, so nothing is registered). Call once every route is subscribed. A row whose
 * route left the snapshot cannot run anywhere and is only logged: that execution needs an operator.
 */
export async function publishReseed(
  queue: QueueProtocol,
  config: PipelineConfig,
  messages: readonly ReseedMessage[],
  logger: Logger,
  options: {
    /** True for a message this process has settled meanwhile (its original was still queued). */
    readonly settled?: (id: string) => boolean;
    /** The execution is ending: publish nothing more into its queues. */
    readonly signal?: AbortSignal;
    /** Called after each message is published or skipped (progress of a long re-seed). */
    readonly onDone?: () => void;
  } = {},
): Promise<void> {
  let skipped = 0;
  for (const m of messages) {
    if (options.signal?.aborted) {
      logger.info("execution ending; re-seeding stopped", {
        remaining: messages.length - messages.indexOf(m),
      });
      return;
    }
    if (options.settled?.(m.id) === true) {
      skipped++;
      options.onDone?.();
      continue;
    }
    const route = config.routes[m.route];
    if (route === undefined) {
      logger.warn("open message row names a route missing from the snapshot; not re-published", {
        messageId: m.id,
        route: m.route,
      });
      continue;
    }
    await queue.publish(`/queue/${route.inbound.queue}`, {
      id: m.id,
      body: m.payload,
      correlationId: m.correlationId,
      headers: { [RESEED_HEADER]: "1" },
    });
    options.onDone?.();
  }
  if (skipped > 0) logger.info("re-seeding skipped messages settled meanwhile", { skipped });
}
