import type {
  Delivery,
  HandlerResult,
  JsonValue,
  MessageEnvelope,
  MessageHandler,
} from "@factflow/protocols";
import { type WaitForOptions, waitFor } from "./wait-for.js";

/** What a recorder saw of one delivery. */
export interface RecordedDelivery {
  readonly id: string;
  /** The envelope as delivered. */
  readonly message: MessageEnvelope;
  readonly body: JsonValue;
  readonly headers: Readonly<Record<string, string>>;
  readonly attempt: number;
  readonly redelivered: boolean;
  readonly subscription: string;
  readonly destination: string;
  /** `performance.now()` when the handler was entered. */
  readonly receivedAt: number;
  /** What the handler ended with: a status, `"threw"`, or `undefined` while it still runs. */
  outcome: string | undefined;
}

/**
 * Decides what the recorded handler returns. `previous` counts earlier deliveries of the same message id
 * to this recorder, so "fail the first time, then acknowledge" is `previous === 0 ? "FAILED" : "ACKNOWLEDGED"`.
 */
export type Responder = (
  delivery: Delivery,
  signal: AbortSignal,
  previous: number,
) => HandlerResult | Promise<HandlerResult>;

/** Records every delivery a handler receives; see {@link collectDeliveries}. */
export interface DeliveryRecorder {
  /** Pass this to `subscribe`. */
  readonly handler: MessageHandler;
  /** Every delivery, in the order the handler was entered. */
  readonly deliveries: readonly RecordedDelivery[];
  /** Handlers running right now. */
  active(): number;
  /** Most handlers that ran at the same moment. */
  maxActive(): number;
  /** Deliveries of one message id. */
  count(id: string): number;
  /** Distinct message ids, in order of first delivery. */
  ids(): string[];
  /** Ids delivered more than once, with their delivery counts. */
  duplicates(): Map<string, number>;
  /** Resolves once at least `n` deliveries were entered. */
  waitForCount(n: number, options?: WaitForOptions): Promise<void>;
  /** Resolves once every id was delivered and its handler returned `status` (any status when omitted). */
  waitForIds(ids: Iterable<string>, options?: WaitForOptions & { status?: string }): Promise<void>;
}

/** The default responder: acknowledge everything. */
export const acknowledgeAll: Responder = () => "ACKNOWLEDGED";

/**
 * A recording handler. Every delivery is recorded before `respond` decides the result; a `respond` that
 * throws makes the handler throw (outcome `"threw"`), which providers must treat as incomplete.
 */
export function collectDeliveries(respond: Responder = acknowledgeAll): DeliveryRecorder {
  const deliveries: RecordedDelivery[] = [];
  const perId = new Map<string, number>();
  const settledWith = new Map<string, Set<string>>();
  let active = 0;
  let maxActive = 0;

  const handler: MessageHandler = async (delivery, signal) => {
    const id = delivery.message.id;
    const previous = perId.get(id) ?? 0;
    perId.set(id, previous + 1);
    const record: RecordedDelivery = {
      id,
      message: delivery.message,
      body: delivery.message.body,
      headers: { ...delivery.message.headers },
      attempt: delivery.attempt,
      redelivered: delivery.redelivered,
      subscription: delivery.subscription,
      destination: delivery.destination,
      receivedAt: performance.now(),
      outcome: undefined,
    };
    deliveries.push(record);
    active += 1;
    maxActive = Math.max(maxActive, active);
    try {
      const result = await respond(delivery, signal, previous);
      record.outcome = typeof result === "string" ? result : result.status;
      return result;
    } catch (error) {
      record.outcome = "threw";
      throw error;
    } finally {
      active -= 1;
      const statuses = settledWith.get(id) ?? new Set<string>();
      settledWith.set(id, statuses);
      statuses.add(record.outcome ?? "threw");
    }
  };

  return {
    handler,
    deliveries,
    active: () => active,
    maxActive: () => maxActive,
    count: (id) => perId.get(id) ?? 0,
    ids: () => [...perId.keys()],
    duplicates: () => new Map([...perId].filter(([, n]) => n > 1)),
    waitForCount: (n, options) =>
      waitFor(() => deliveries.length >= n, {
        ...options,
        description: () => `${n} deliveries (have ${deliveries.length})`,
      }).then(() => undefined),
    waitForIds: (ids, options = {}) => {
      const wanted = [...ids];
      const done = (id: string): boolean => {
        const statuses = settledWith.get(id);
        if (statuses === undefined) return false;
        return options.status === undefined ? statuses.size > 0 : statuses.has(options.status);
      };
      return waitFor(() => wanted.every(done), {
        ...options,
        description: () =>
          `${wanted.length} messages to be handled${options.status === undefined ? "" : ` with ${options.status}`} (missing ${wanted.filter((id) => !done(id)).length})`,
      }).then(() => undefined);
    },
  };
}
