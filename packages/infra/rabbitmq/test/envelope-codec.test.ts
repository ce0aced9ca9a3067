import { Headers } from "@factflow/protocols";
import type { Message } from "amqplib";
import { describe, expect, it } from "vitest";
import { decodeMessage, encodeMessage, publishOptions, stringHeaders } from "../src/envelope-codec.js";
import { rejects } from "./helpers.js";

/** What the broker hands back for a publish with these options (the parts the codec reads). */
function asReceived(
  content: Buffer,
  options: ReturnType<typeof publishOptions>,
  extraHeaders: Record<string, unknown> = {},
): Message {
  return {
    content,
    fields: { deliveryTag: 1, redelivered: false, exchange: "", routingKey: "q" },
    properties: {
      contentType: options.contentType,
      contentEncoding: undefined,
      headers: { ...options.headers, ...extraHeaders },
      deliveryMode: 2,
      priority: options.priority,
      correlationId: options.correlationId,
      replyTo: undefined,
      expiration: undefined,
      messageId: options.messageId,
      timestamp: undefined,
      type: undefined,
      userId: undefined,
      appId: undefined,
      clusterId: undefined,
    },
  } as Message;
}

describe("envelope codec", () => {
  it("round-trips an envelope, carrying ids as AMQP properties and restoring them as headers", () => {
    const encoded = encodeMessage(
      "/queue/a",
      {
        body: { n: 1, s: "é" },
        headers: { "x-user": "u" },
        correlationId: "c-1",
        executionId: "e-1",
        traceparent: "tp",
        priority: 7,
      },
      1024,
    );
    expect(encoded.headers[Headers.messageId]).toBeUndefined();
    expect(encoded.headers[Headers.deliveryAttempt], "attempt 1 is implied").toBeUndefined();
    const options = publishOptions(encoded, true);
    expect(options).toMatchObject({
      persistent: true,
      mandatory: true,
      messageId: encoded.id,
      correlationId: "c-1",
      priority: 7,
    });
    const decoded = decodeMessage(asReceived(encoded.content, options, { "x-death": [{ count: 1 }] }));
    if ("error" in decoded) throw new Error(decoded.error);
    expect(decoded.attempt).toBe(1);
    expect(decoded.envelope).toMatchObject({
      id: encoded.id,
      body: { n: 1, s: "é" },
      correlationId: "c-1",
      executionId: "e-1",
      traceparent: "tp",
      priority: 7,
    });
    expect(decoded.envelope.headers).toMatchObject({
      "x-user": "u",
      [Headers.messageId]: encoded.id,
      [Headers.correlationId]: "c-1",
      [Headers.deliveryAttempt]: "1",
    });
    expect(decoded.envelope.headers["x-death"], "broker tables are dropped").toBeUndefined();
    expect(Number.isNaN(Date.parse(decoded.envelope.publishedAt))).toBe(false);
  });

  it("keeps a caller's id and attempt, and defaults the correlation id to the id", () => {
    const encoded = encodeMessage(
      "/queue/a",
      { body: 1, id: "fixed", headers: { [Headers.deliveryAttempt]: "3" } },
      1024,
    );
    expect(encoded.id).toBe("fixed");
    expect(encoded.correlationId).toBe("fixed");
    const decoded = decodeMessage(asReceived(encoded.content, publishOptions(encoded, false)));
    if ("error" in decoded) throw new Error(decoded.error);
    expect(decoded.attempt).toBe(3);
  });

  it("refuses non-JSON bodies, non-string headers, bad priorities and oversized messages", () => {
    expect(rejects(() => encodeMessage("/queue/a", { body: { d: new Date(0) } as never }, 1024)).code).toBe(
      "invalid_message",
    );
    expect(rejects(() => encodeMessage("/queue/a", { body: undefined as never }, 1024)).code).toBe(
      "invalid_message",
    );
    expect(rejects(() => encodeMessage("/queue/a", { body: 1, headers: { n: 1 as never } }, 1024)).code).toBe(
      "invalid_message",
    );
    expect(rejects(() => encodeMessage("/queue/a", { body: 1, priority: 10 }, 1024)).code).toBe(
      "invalid_message",
    );
    const big = rejects(() => encodeMessage("/queue/a", { body: "x".repeat(2000) }, 1024));
    expect(big.code).toBe("message_too_large");
    expect(big.message).toContain("1024");
  });

  it("reports a body that is not JSON instead of throwing", () => {
    const received = asReceived(Buffer.from("not json"), { messageId: "m" });
    expect(decodeMessage(received)).toEqual({ error: "body is not valid JSON" });
    expect(
      stringHeaders({
        ...received,
        properties: { ...received.properties, headers: { a: 1, b: true, c: Buffer.from("x"), d: { t: 1 } } },
      }),
    ).toEqual({
      a: "1",
      b: "true",
      c: "x",
    });
  });
});
