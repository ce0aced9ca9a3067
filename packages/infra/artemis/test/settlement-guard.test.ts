import { describe, expect, it } from "vitest";
import { ALL_CHECKS, SettlementGuard } from "../src/index.js";

describe("SettlementGuard", () => {
  it("lets the delivering connection and consumer settle", () => {
    const guard = new SettlementGuard();
    const { ticket, reissue } = guard.admit(1, 1, "q\nsend-1");
    expect(reissue).toBe(false);
    expect(guard.verdict(ticket, 1, 1)).toBeUndefined();
  });

  it("withholds on a new connection, a replaced consumer, or a newer delivery of the same message", () => {
    const guard = new SettlementGuard(ALL_CHECKS);
    const { ticket } = guard.admit(1, 1, "q\nsend-1");
    expect(guard.verdict(ticket, 2, 1)).toBe("connection-changed");
    expect(guard.verdict(ticket, 1, 2)).toBe("consumer-replaced");
    const again = guard.admit(1, 1, "q\nsend-1");
    expect(again.reissue).toBe(true);
    expect(guard.verdict(ticket, 1, 1)).toBe("reissued");
    expect(guard.verdict(again.ticket, 1, 1)).toBeUndefined();
    guard.release(again.ticket);
    expect(guard.verdict(ticket, 1, 1), "still stale after the newer one settled").toBe("reissued");
  });

  it("checks only what it is told to", () => {
    const guard = new SettlementGuard({ connection: false, consumer: false, reissue: false });
    const { ticket } = guard.admit(1, 1, "id");
    guard.admit(1, 1, "id");
    expect(guard.verdict(ticket, 5, 5)).toBeUndefined();
  });
});
