/**
 * Which of the three invalidation checks run before an ACK. All three are on in production; tests
 * switch single ones off to show what each one prevents.
 */
export interface SettlementChecks {
  /** The delivering connection is still the live one. @default true */
  readonly connection: boolean;
  /** The delivering consumer was not replaced (e.g. a restarted subscription). @default true */
  readonly consumer: boolean;
  /** No newer delivery of the same broker message (same `x-send-id`) is in flight. @default true */
  readonly reissue: boolean;
}

export const ALL_CHECKS: SettlementChecks = Object.freeze({
  connection: true,
  consumer: true,
  reissue: true,
});

/** Where a delivery came from, captured when it arrived. */
export interface DeliveryTicket {
  /** Connection generation that dispatched it. */
  readonly generation: number;
  /** Consumer attachment (a new one per SUBSCRIBE) that received it. */
  readonly attachment: number;
  /** Stable identity of the broker message (`x-send-id`), when it has one. */
  readonly identity: string | undefined;
  /** Unique per delivery. */
  readonly serial: number;
}

/** Why an acknowledgement was withheld. */
export type SupersededBy = "connection-changed" | "consumer-replaced" | "reissued";

/**
 * Decides whether an ACK may go out. Artemis keeps an unsettled delivery per TCP connection, keyed on
 * (consumer, message); an ACK for one it has reissued is answered with an ERROR frame and a closed
 * connection, which voids every other ACK in flight and feeds a redelivery loop. So an ACK is sent
 * only when the connection that delivered is still the live one, its consumer was not replaced, and
 * no newer delivery of the same broker message has arrived since (STOMP mints a new message-id for a
 * reissue, so the message's own id header is the only stable identity).
 */
export class SettlementGuard {
  private readonly newest = new Map<string, number>();
  private serial = 0;

  constructor(private readonly checks: SettlementChecks = ALL_CHECKS) {}

  /** Records an arriving delivery; returns its ticket and whether it reissues one still in flight. */
  admit(
    generation: number,
    attachment: number,
    identity: string | undefined,
  ): { ticket: DeliveryTicket; reissue: boolean } {
    this.serial += 1;
    const ticket: DeliveryTicket = { generation, attachment, identity, serial: this.serial };
    let reissue = false;
    if (identity !== undefined) {
      reissue = this.newest.has(identity);
      this.newest.set(identity, ticket.serial);
    }
    return { ticket, reissue };
  }

  /** Undefined when the ACK may go out, otherwise why it must be withheld. */
  verdict(ticket: DeliveryTicket, liveGeneration: number, liveAttachment: number): SupersededBy | undefined {
    if (this.checks.connection && ticket.generation !== liveGeneration) return "connection-changed";
    if (this.checks.consumer && ticket.attachment !== liveAttachment) return "consumer-replaced";
    if (
      this.checks.reissue &&
      ticket.identity !== undefined &&
      this.newest.get(ticket.identity) !== ticket.serial
    )
      return "reissued";
    return undefined;
  }

  /** Forgets a delivery once it is settled or given up on. */
  release(ticket: DeliveryTicket): void {
    if (ticket.identity !== undefined && this.newest.get(ticket.identity) === ticket.serial)
      this.newest.delete(ticket.identity);
  }
}
