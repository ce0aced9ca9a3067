import { Headers } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { decodeMessage, encodeMessage } from "../src/index.js";

describe("codec", () => {
  it("round-trips body and headers through one payload, restoring implicit defaults", () => {
    const encoded = encodeMessage(
      "/queue/a",
      { body: { n: 1, text: "é" }, headers: { "X-Mixed-Case": "ü" } },
      1_000,
    );
    const decoded = decodeMessage(encoded.payload);
    if ("error" in decoded) throw new Error(decoded.error);
    expect(decoded.envelope.body).toEqual({ n: 1, text: "é" });
    expect(decoded.envelope.id).toBe(encoded.id);
    expect(decoded.envelope.correlationId).toBe(encoded.id);
    expect(decoded.attempt).toBe(1);
    expect(decoded.envelope.headers["X-Mixed-Case"]).toBe("ü");
    expect(decoded.envelope.headers[Headers.deliveryAttempt]).toBe("1");
  });

  it("reads raw peeked bytes too, and explains what is not a Factflow message", () => {
    const encoded = encodeMessage("/queue/a", { body: [1, 2] }, 1_000);
    const raw = Buffer.from(encoded.payload, "base64");
    const decoded = decodeMessage(raw);
    expect("error" in decoded ? decoded.error : decoded.envelope.body).toEqual([1, 2]);
    const bad = decodeMessage(Buffer.from("not json"));
    expect(bad).toEqual({ error: "payload is not valid JSON" });
  });

  it("carries the delay and refuses oversized messages", () => {
    expect(encodeMessage("/queue/a", { body: 1, delayMs: 250 }, 1_000).delayMs).toBe(250);
    expect(() => encodeMessage("/queue/a", { body: "x".repeat(2_000) }, 1_000)).toThrow(
      expect.objectContaining({ code: "message_too_large" }),
    );
  });
});
