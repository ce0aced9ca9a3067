import { describe, expect, it } from "vitest";
import { decodeMessage, encodeMessage, sendHeaders } from "../src/envelope-codec.js";

describe("envelope codec", () => {
  it("round-trips an envelope and leaves defaults off the wire", () => {
    const encoded = encodeMessage(
      "/queue/q",
      { body: { a: [1, "b"] }, executionId: "exec-1", priority: 7 },
      1_000,
    );
    const wire = sendHeaders(encoded, "ANYCAST");
    expect(wire["x-correlation-id"], "correlation id = id is implicit").toBeUndefined();
    expect(wire["x-delivery-attempt"], "attempt 1 is implicit").toBeUndefined();
    expect(wire).toMatchObject({ persistent: "true", "destination-type": "ANYCAST", priority: "7" });
    expect(wire["x-send-id"]).toMatch(/^[A-Za-z0-9_-]{13,}$/);
    const decoded = decodeMessage(
      { ...wire, "message-id": "1,2", ack: "1,2", redelivered: "false" },
      encoded.body,
    );
    expect(decoded.attempt).toBe(1);
    expect(decoded.envelope).toMatchObject({
      id: encoded.id,
      correlationId: encoded.id,
      executionId: "exec-1",
      priority: 7,
      body: { a: [1, "b"] },
    });
    expect(decoded.envelope.headers["x-delivery-attempt"]).toBe("1");
    expect(
      decoded.envelope.headers["x-send-id"],
      "protocol headers stay out of the envelope",
    ).toBeUndefined();
  });

  it("schedules a delay on the broker clock and gives every SEND its own identity", () => {
    const encoded = encodeMessage("/queue/q", { body: 1, delayMs: 250 }, 1_000);
    const first = sendHeaders(encoded, "ANYCAST");
    const second = sendHeaders(encoded, "ANYCAST");
    expect(first.AMQ_SCHEDULED_DELAY).toBe("250");
    expect(first["x-send-id"]).not.toBe(second["x-send-id"]);
  });

  it("refuses reserved headers and oversized messages with the fix in the message", () => {
    expect(() => encodeMessage("/queue/q", { body: 1, headers: { persistent: "false" } }, 1_000)).toThrow(
      /reserved/,
    );
    expect(() => encodeMessage("/queue/q", { body: "x".repeat(2_000) }, 1_000)).toThrow(/maxMessageBytes/);
  });
});
