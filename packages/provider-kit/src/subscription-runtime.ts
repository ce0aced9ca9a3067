import {
  type Delivery,
  DeliveryLostError,
  type Destination,
  type DurabilityCounters,
  type Logger,
  type MessageEnvelope,
  type MessageHandler,
  type Subscription,
} from "@factflow/protocols";
import { carryOutVerdict, carryOutVerdictNow, type VerdictContext } from "./carry-out-verdict.js";
import { hasGroupKey } from "./group-key.js";
import { HandlerRuns, type RunWatcher } from "./handler-runs.js";
import { checkDestination } from "./outbound.js";
import { decideSettlement, type HandlerOutcome } from "./settlement.js";
import { SettlementReport, settleWithin, undecodableVerdict } from "./settlement-report.js";
import type { ResolvedSubscribeOptions } from "./subscribe-options.js";
import type { DecodedDelivery, SubscriptionPort, UndecodableDelivery } from "./subscription-port.js";

/** Longest one step of a stop (stop receiving, settlements in flight, closing) may wait on the broker. */
const SHUTDOWN_STEP_MS = 2_000;

/** A delivery as the port handed it over, then while its handler runs and it settles. */
interface Received<D> {
  readonly delivery: D;
  readonly redelivered: boolean;
  /** The decoded message and its attempt, once its handler started. */
  envelope: MessageEnvelope | undefined;
  attempt: number;
  /** Its handler slot was given to the next delivery. */
  freed: boolean;
}

/** What a {@link SubscriptionRuntime} is built from. */
export interface SubscriptionRuntimeOptions<D> {
  /** The provider's name, for error messages. */
  readonly provider: string;
  /** The destination subscribed to (`/queue/…` or `/topic/…`). */
  readonly destination: string;
  /** The handler and options `subscribe` received from `guardProvider`. */
  readonly handler: MessageHandler;
  readonly options: ResolvedSubscribeOptions;
  readonly port: SubscriptionPort<D>;
  /** The provider's counters (one set per provider instance). */
  readonly counters: DurabilityCounters;
  readonly logger?: Logger;
  /** Called once when the subscription starts to stop (e.g. to forget it in the provider). */
  readonly onStop?: () => void;
  /** Longest each step of a stop waits on the broker. @default 2000 */
  readonly shutdownStepMs?: number;
}

/**
 * The subscription loop every provider runs, over a small {@link SubscriptionPort} that is the
 * broker's part. It keeps deliveries in arrival order and runs at most `concurrency` handlers (one
 * for `ordering: "fifo"` without a group key; grouped subscriptions arrive already wrapped in the
 * kit's group lanes by `guardProvider`), each under its deadline and abort signal (`HandlerRuns`). It
 * decides each settlement (`decideSettlement`; `undecodableVerdict` for a message that is not a
 * Factflow message), carries it out through the port (a retry or dead-letter copy confirmed before
 * the original is acknowledged; `pauseAfterCopyFailure` then a hand-back when it is not), withholds
 * what the broker has reissued (`superseded`), and reports each settled delivery once through
 * `SettlementReport` (`acked`, `retried`, `dead-lettered` with its reason, `handed-back`). A
 * handler's `settleAfter` is awaited before its verdict is carried out (see `runHandler`), its slot
 * meanwhile serving the next delivery; a waiting
 * delivery the port no longer holds is dropped unrun (`dropStale`). `stop()`
 * stops receiving, aborts the running handlers (handed back), gives back what no handler saw, waits a
 * bounded time for settlements in flight (`settleWithin`), then closes the port.
 *
 * How the first-party brokers map onto the port (`D` is their delivery handle):
 *
 * - RabbitMQ: `D` = the `ConsumeMessage` and the channel attachment it arrived on. `receive` =
 *   `channel.prefetch` + `consume` (the broker's prefetch is the flow control), `redelivered` =
 *   `fields.redelivered`; `stopReceiving` = `basic.cancel`; `isCurrent` = the attachment is the live
 *   one; `ack` = `channel.ack`, `handBack` = `nack(requeue)` (false once the channel closed);
 *   `publishCopy` = publish to `<queue>.retry` (TTL) or the dead-letter queue and await the publisher
 *   confirm → `confirmed`; `classifyError` = `classifyAmqpError`; `close` = the channel's
 *   hand-back-and-close.
 * - Redis streams: `D` = the entry id and its raw fields. `receive` = the `XREADGROUP` loop on the
 *   reader connection, sized from `unsettled`, `waiting` and `running` and woken by `release` and
 *   `handlerFreed` (plus reclaimed entries, `redelivered` true); `stopReceiving` = disconnect the
 *   reader and stop heartbeat and reclaim; `isCurrent` = always true (the scripts find out); `ack` =
 *   the batched `XACK` (false when the entry was reclaimed); `handBack` = the SETTLE script's `back`
 *   mode (both sent again while Redis is unreachable: the scripts are idempotent); `publishCopy` = the
 *   SETTLE script (copy and `XACK` in one script) → `settled`, or `superseded` when another consumer
 *   reclaimed the entry; `classifyError` = `classifyRedisError`; `close` = hand back stray entries,
 *   then `LEAVE`.
 * - Artemis (STOMP): `D` = the frame, its decoded message and its settlement-guard ticket. `receive` =
 *   `SUBSCRIBE` with `ack: client-individual` (the consumer window is the flow control), again on
 *   every new connection, `redelivered` = the redelivered header or a reissue the guard saw;
 *   `stopReceiving` = no more re-subscribing (frames arriving during a stop are left to the broker);
 *   `isCurrent` = the guard's verdict on the ticket for the live connection and consumer; `ack` =
 *   `ACK`; `handBack` = nothing to send (STOMP has no requeue: the broker reissues once the consumer
 *   goes), and for `copy-failed` re-create the consumer; `publishCopy` = `SEND` with a receipt
 *   (`AMQ_SCHEDULED_DELAY` for a delay) → `confirmed`; `classifyError` = its classifier; `release` =
 *   release the ticket; `close` = `UNSUBSCRIBE`.
 * - Pulsar: `D` = the message and its consumer link; `receive` = open the links with a receiver
 *   queue of `prefetch` (the broker's window of unsettled messages), `redelivered` =
 *   `redeliveryCount > 0`; `stopReceiving` = stop reopening links (a WebSocket consumer cannot pause);
 *   `isCurrent` = the link is the live one; `ack` = ack; `handBack` = negative ack for `copy-failed`
 *   (nothing on a stop: closing the link redelivers); `publishCopy` = produce to the retry topic
 *   (`deliverAfterMs`) or the dead-letter topic → `confirmed`; `close` = close the links.
 */
export class SubscriptionRuntime<D> implements Subscription {
  readonly destination: string;
  readonly name: string;
  /** Deliveries the port may have unsettled at once (1 for a serial FIFO subscription). */
  readonly prefetch: number;
  /** Handlers running at once at most. */
  readonly concurrency: number;
  readonly #options: SubscriptionRuntimeOptions<D>;
  readonly #port: SubscriptionPort<D>;
  readonly #runs: HandlerRuns;
  readonly #verdicts: VerdictContext<D>;
  readonly #isTopic: boolean;
  #waiting: Received<D>[] = [];
  #running = 0;
  #unsettled = 0;
  /** Resolves the stop's wait once nothing is unsettled. */
  #drained: (() => void) | undefined;
  #stopping: Promise<void> | undefined;
  #pumping = false;
  #pumpAgain = false;
  /** Hears how each handler run ends (one object for every delivery). */
  readonly #watcher: RunWatcher<Received<D>> = {
    returned: (received) => this.#free(received),
    settled: (received, outcome) => this.#settled(received, outcome),
  };

  constructor(options: SubscriptionRuntimeOptions<D>) {
    const { options: subscribe, port } = options;
    this.#options = options;
    this.#port = port;
    this.destination = options.destination;
    this.name = subscribe.subscription;
    this.#isTopic = checkDestination(options.provider, options.destination).kind === "topic";
    const serial = subscribe.ordering === "fifo" && !hasGroupKey(subscribe);
    this.prefetch = serial ? 1 : subscribe.prefetch;
    this.concurrency = serial ? 1 : subscribe.concurrency;
    this.#runs = new HandlerRuns({
      timeoutMs: subscribe.handlerTimeoutMs,
      // A handler that declares one parameter never holds its signal: its controllers are reused
      // (as with `releasesSignal`), as the embedded broker does for such handlers.
      releasesSignal: subscribe.releasesSignal || options.handler.length === 1,
      signalUnseen: options.handler.length === 1,
      concurrency: this.concurrency,
      // A result that comes after its timeout or the stop already settled the delivery settles
      // nothing: the broker has reissued (or will reissue) the message.
      onLate: () => {
        options.counters.superseded += 1;
      },
    });
    const report = new SettlementReport(options.counters, this, subscribe.onSettled, options.logger);
    this.#verdicts = {
      port,
      counters: options.counters,
      report,
      origin: this.#isTopic
        ? { destination: this.destination, subscription: this.name }
        : { destination: this.destination },
      logger: options.logger,
      stopping: () => this.#stopping !== undefined,
    };
  }

  /** Deliveries received and not yet done with (waiting, running or settling). */
  get unsettled(): number {
    return this.#unsettled;
  }

  /** Deliveries received and waiting for a handler. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Handlers running, or their deliveries settling (not those awaiting only a `settleAfter`). */
  get running(): number {
    return this.#running;
  }

  /**
   * Starts the port's consumer; resolves once the broker registered it. When the port cannot start,
   * the subscription is stopped (so `onStop` and the port's `close` run) and this rejects with the
   * port's error.
   */
  async start(): Promise<void> {
    try {
      await this.#port.receive((delivery, redelivered) => this.#deliver(delivery, redelivered));
    } catch (error) {
      await this.unsubscribe();
      throw error;
    }
  }

  /** Stops the subscription (idempotent): see the class comment. */
  unsubscribe(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  #deliver(delivery: D, redelivered: boolean): void {
    this.#unsettled += 1;
    if (this.#stopping !== undefined) {
      void this.#handBackUnseen(delivery);
      return;
    }
    if (redelivered) this.#options.counters.redelivered += 1;
    const received: Received<D> = { delivery, redelivered, envelope: undefined, attempt: 1, freed: false };
    // A free slot and nobody ahead of it (an in-process broker delivers only then): start it now.
    if (!this.#pumping && this.#waiting.length === 0 && this.#running < this.concurrency) {
      if (!this.#port.isCurrent(delivery)) {
        this.#done(delivery);
        return;
      }
      this.#running += 1;
      this.#pumping = true;
      try {
        this.#start(received);
      } finally {
        this.#pumping = false;
      }
      if (this.#pumpAgain) this.#pump();
      return;
    }
    this.#waiting.push(received);
    this.#pump();
  }

  /**
   * Forgets the waiting deliveries the port no longer holds (`isCurrent` false: say their channel
   * closed, so the broker has them back): they are neither run nor settled, nor counted. The runtime
   * also skips them when their turn comes; a port calls this to drop them at once, so `unsettled`
   * and the broker's flow control see the room. The signals of handlers still running on such
   * deliveries abort with a `DeliveryLostError`, and their runs end (a hand-back, which the port
   * finds stale): a consumer may let such a handler finish, to know the redelivery for a duplicate,
   * and lets go of what it parks on that delivery (a stateful batch member).
   */
  dropStale(): void {
    const kept: Received<D>[] = [];
    for (const received of this.#waiting) {
      if (this.#port.isCurrent(received.delivery)) kept.push(received);
      else this.#done(received.delivery);
    }
    this.#waiting = kept;
    // Nothing handlers still running on such deliveries return can settle: their runs end here.
    this.#runs.abortWhere<Received<D>>(
      (received) => !this.#port.isCurrent(received.delivery),
      new DeliveryLostError(this.destination),
    );
  }

  #pump(): void {
    // A handler that settles synchronously frees its slot, which pumps again, from inside this
    // loop: fold that in here instead of nesting a loop per delivery.
    if (this.#pumping) {
      this.#pumpAgain = true;
      return;
    }
    this.#pumping = true;
    try {
      do {
        this.#pumpAgain = false;
        while (this.#stopping === undefined && this.#running < this.concurrency && this.#waiting.length > 0) {
          const received = this.#waiting.shift() as Received<D>;
          if (!this.#port.isCurrent(received.delivery)) {
            this.#done(received.delivery);
            continue;
          }
          this.#running += 1;
          this.#start(received);
        }
      } while (this.#pumpAgain);
    } finally {
      this.#pumping = false;
    }
  }

  /**
   * Starts the handler of one delivery; `#settled` carries out its verdict. The delivery's slot is
   * freed (`#free`) once: when the handler returned with a `settleAfter` still pending (the delivery
   * stays unsettled, within the port's flow control, until it settles), else once it is settled.
   */
  #start(received: Received<D>): void {
    const { delivery, redelivered } = received;
    let decoded: DecodedDelivery | UndecodableDelivery;
    try {
      decoded = this.#port.decode(delivery);
    } catch (error) {
      this.#failed(error, "settle a delivery");
      this.#finished(received);
      return;
    }
    if ("error" in decoded) {
      void this.#undecodable(received, decoded);
      return;
    }
    const { envelope, attempt } = decoded;
    received.envelope = envelope;
    received.attempt = attempt;
    const run: Delivery = {
      message: envelope,
      destination: this.destination as Destination,
      subscription: this.name,
      attempt,
      redelivered: decoded.redelivered ?? redelivered,
    };
    // Bounded whatever the handler does: a timeout or a stop settles at once, even if it never returns.
    this.#runs.start(this.#options.handler, run, this.#watcher, received);
  }

  #settled(received: Received<D>, outcome: HandlerOutcome): void {
    const envelope = received.envelope as MessageEnvelope;
    const attempt = received.attempt;
    let pending: Promise<void> | undefined;
    try {
      const { retry } = this.#options.options;
      const verdict = decideSettlement(outcome, { attempt, policy: retry, isTopic: this.#isTopic });
      pending = carryOutVerdictNow(this.#verdicts, received.delivery, {
        verdict,
        headers: envelope.headers,
        identity: { messageId: envelope.id, attempt },
        undecodable: false,
      });
    } catch (error) {
      this.#failed(error, "settle a delivery");
    }
    if (pending === undefined) this.#finished(received);
    else
      pending.then(
        () => this.#finished(received),
        (error: unknown) => {
          this.#failed(error, "settle a delivery");
          this.#finished(received);
        },
      );
  }

  async #undecodable(received: Received<D>, decoded: UndecodableDelivery): Promise<void> {
    try {
      const identity = { messageId: undefined, attempt: 1 };
      const verdict = undecodableVerdict(decoded.error);
      await carryOutVerdict(this.#verdicts, received.delivery, {
        verdict,
        headers: decoded.headers,
        identity,
        undecodable: true,
      });
    } catch (error) {
      this.#failed(error, "settle a delivery");
    } finally {
      this.#finished(received);
    }
  }

  /** The delivery is settled (or could not be): done with, and its slot freed if it still held it. */
  #finished(received: Received<D>): void {
    this.#done(received.delivery);
    this.#free(received);
  }

  /** Gives the delivery's handler slot to the next delivery, once. */
  #free(received: Received<D>): void {
    if (received.freed) return;
    received.freed = true;
    this.#running -= 1;
    if (this.#waiting.length > 0) this.#pump();
    this.#port.handlerFreed?.();
  }

  async #handBackUnseen(delivery: D): Promise<void> {
    try {
      if (this.#port.isCurrent(delivery)) await this.#port.handBack(delivery, "not-run");
    } catch (error) {
      this.#failed(error, "hand back a delivery");
    } finally {
      this.#done(delivery);
    }
  }

  #done(delivery: D): void {
    this.#unsettled -= 1;
    this.#port.release?.(delivery);
    if (this.#unsettled === 0) this.#drained?.();
  }

  #failed(error: unknown, operation: string): void {
    const classified = this.#port.classifyError(error, `${operation} of "${this.destination}"`);
    this.#options.logger?.warn("a delivery could not be settled; the broker keeps it", {
      destination: this.destination,
      error: classified.message,
    });
  }

  async #stop(): Promise<void> {
    const step = this.#options.shutdownStepMs ?? SHUTDOWN_STEP_MS;
    this.#options.onStop?.();
    // Stop receiving first, so the broker stops handing out deliveries while handlers wind down.
    await settleWithin(this.#port.stopReceiving(), step);
    this.#runs.abortAll(new Error("subscription closed"));
    for (const { delivery } of this.#waiting.splice(0)) void this.#handBackUnseen(delivery);
    // Settlements in flight (a copy awaiting its confirmation, a hand-back) get a bounded moment to
    // finish, so their originals are settled rather than redelivered as duplicates.
    const drained = new Promise<void>((resolve) => {
      this.#drained = resolve;
    });
    if (this.#unsettled > 0) await settleWithin(drained, step * 2);
    if (this.#port.close !== undefined) await settleWithin(this.#port.close(), step);
  }
}
