import { Headers, ProviderError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import {
  checkDestination,
  compactHeaders,
  envelopeFromHeaders,
  PUBLISHED_AT_HEADER,
  parseAttempt,
  prepareOutbound,
} from "../src/index.js";

function thrown(work: () => unknown): ProviderError {
  try {
    work();
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderError);
    return error as ProviderError;
  }
  throw new Error("expected a ProviderError");
}

const opts = { maxBytes: 1_024, now: Date.UTC(2026, 0, 2, 3, 4, 5, 6) };

describe("prepareOutbound", () => {
  it("fills id, correlation id, attempt 1 and the publish time, and adds the identity headers", () => {
    const p = prepareOutbound("kit", "/queue/a", { body: { n: 1 }, headers: { "x-user": "u" } }, opts);
    expect(p.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(p.correlationId).toBe(p.id);
    expect(p.attempt).toBe(1);
    expect(p.delayMs).toBe(0);
    expect(p.publishedAt).toBe("2026-01-02T03:04:05.006Z");
    expect(p.bodyJson).toBe('{"n":1}');
    expect(p.headers).toEqual({ "x-user": "u", [Headers.messageId]: p.id, [Headers.correlationId]: p.id });
    let bytes = p.bodyJson.length;
    for (const [k, v] of Object.entries(p.headers)) bytes += k.length + v.length;
    expect(p.bytes).toBe(bytes);
  });

  it("keeps the caller's fields, and with identityHeaders keep, those carried in headers", () => {
    const p = prepareOutbound(
      "kit",
      "/queue/a",
      {
        body: "é",
        correlationId: "c",
        executionId: "e",
        traceparent: "t",
        priority: 7,
        delayMs: 50,
        headers: {
          [Headers.messageId]: "from-header",
          [Headers.deliveryAttempt]: "3",
          [PUBLISHED_AT_HEADER]: "2020-01-01T00:00:00.000Z",
        },
      },
      opts,
    );
    expect(p).toMatchObject({
      id: "from-header",
      correlationId: "c",
      executionId: "e",
      traceparent: "t",
      priority: 7,
      delayMs: 50,
      attempt: 3,
      publishedAt: "2020-01-01T00:00:00.000Z",
    });
    expect(p.headers[Headers.priority]).toBe("7");
    expect(p.headers[Headers.deliveryAttempt], "the attempt is a field, not a header").toBeUndefined();
    expect(p.bytes, "UTF-8 bytes are counted").toBeGreaterThan(p.bodyJson.length);
  });

  it("ignores identity headers with identityHeaders drop", () => {
    const p = prepareOutbound(
      "kit",
      "/queue/a",
      {
        body: 1,
        headers: { [Headers.messageId]: "h", [Headers.deliveryAttempt]: "4", [Headers.priority]: "2" },
      },
      { ...opts, identityHeaders: "drop" },
    );
    expect(p.id).not.toBe("h");
    expect(p.attempt).toBe(1);
    expect(p.priority).toBeUndefined();
    expect(p.headers[Headers.priority]).toBeUndefined();
  });

  it("refuses bad input with invalid_message and the destination in the message", () => {
    const cases: [unknown, RegExp][] = [
      [null, /needs a message object/],
      [{}, /has no body/],
      [{ body: { d: new Date(0) } }, /not plain JSON at \$\.d/],
      [{ body: { n: Number.NaN } }, /not plain JSON at \$\.n/],
      [{ body: 1, headers: { n: 1 } }, /header "n" .* must be a string, got number/],
      [{ body: 1, headers: "x" }, /headers .* must be an object/],
      [{ body: 1, priority: 10 }, /priority .* from 0 to 9, got 10/],
      [{ body: 1, priority: 1.5 }, /priority/],
      [{ body: 1, delayMs: -1 }, /delayMs .* >= 0/],
      [{ body: 1, id: "" }, /message\.id .* non-empty string/],
      [{ body: 1, correlationId: 5 }, /message\.correlationId/],
    ];
    for (const [message, pattern] of cases) {
      const error = thrown(() => prepareOutbound("kit", "/queue/a", message as never, opts));
      expect(error.code, String(pattern)).toBe("invalid_message");
      expect(error.reason).toBe("invalid-input");
      expect(error.retryable).toBe(false);
      expect(error.message).toMatch(/^\[factflow\/kit\] /);
      expect(error.message).toMatch(pattern);
      if (message !== null) expect(error.message).toContain('"/queue/a"');
    }
  });

  it("refuses broker-reserved headers, naming who reserves them", () => {
    const error = thrown(() =>
      prepareOutbound(
        "kit",
        "/queue/a",
        { body: 1, headers: { persistent: "no" } },
        {
          ...opts,
          reservedHeaders: { test: (name) => name === "persistent", by: "STOMP" },
        },
      ),
    );
    expect(error.code).toBe("invalid_message");
    expect(error.message).toContain('header "persistent" for "/queue/a" is reserved by STOMP');
  });

  it("refuses a message above maxBytes with message_too_large and the fix", () => {
    const error = thrown(() => prepareOutbound("kit", "/queue/a", { body: "x".repeat(2_000) }, opts));
    expect(error.code).toBe("message_too_large");
    expect(error.message).toMatch(/is \d+ bytes .* limit of 1024 \(maxMessageBytes\)/);
  });
});

describe("checkDestination", () => {
  it("parses good destinations and refuses bad ones with invalid_destination", () => {
    expect(checkDestination("kit", "/topic/a/b")).toEqual({ kind: "topic", name: "a/b" });
    for (const bad of ["orders", "/queue/", "/queue/has space", 5]) {
      const error = thrown(() => checkDestination("kit", bad as string));
      expect(error.code).toBe("invalid_destination");
      expect(error.reason).toBe("invalid-input");
    }
  });
});

describe("envelope headers", () => {
  it("compacts defaults away and restores them on decode", () => {
    const p = prepareOutbound("kit", "/queue/a", { body: { a: 1 }, executionId: "e", priority: 4 }, opts);
    const wire = compactHeaders(p);
    expect(wire[Headers.correlationId]).toBeUndefined();
    expect(wire[Headers.deliveryAttempt]).toBeUndefined();
    expect(wire[PUBLISHED_AT_HEADER]).toBe(p.publishedAt);
    expect(p.headers[PUBLISHED_AT_HEADER], "compaction copies").toBeUndefined();
    const { envelope, attempt } = envelopeFromHeaders({ ...wire }, { a: 1 });
    expect(attempt).toBe(1);
    expect(envelope).toEqual({
      id: p.id,
      body: { a: 1 },
      correlationId: p.id,
      executionId: "e",
      priority: 4,
      publishedAt: p.publishedAt,
      headers: {
        ...wire,
        [Headers.correlationId]: p.id,
        [Headers.deliveryAttempt]: "1",
      },
    });
  });

  it("keeps a non-default attempt and correlation id, and uses fallbacks when headers are absent", () => {
    const p = prepareOutbound(
      "kit",
      "/queue/a",
      { body: 1, correlationId: "c", headers: { [Headers.deliveryAttempt]: "3" } },
      opts,
    );
    const wire = compactHeaders(p);
    expect(wire[Headers.deliveryAttempt]).toBe("3");
    expect(wire[Headers.correlationId]).toBe("c");
    const decoded = envelopeFromHeaders({ "x-other": "o" }, null, {
      id: "prop-id",
      correlationId: "prop-c",
      priority: 12,
      publishedAt: "2021-01-01T00:00:00.000Z",
    });
    expect(decoded.envelope).toMatchObject({
      id: "prop-id",
      correlationId: "prop-c",
      priority: 9,
      publishedAt: "2021-01-01T00:00:00.000Z",
    });
    expect(decoded.envelope.executionId).toBeUndefined();
    expect(envelopeFromHeaders({ [Headers.deliveryAttempt]: "zero" }, 1).attempt).toBe(1);
    expect(envelopeFromHeaders({}, 1).envelope.id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("parses attempts leniently", () => {
    expect([parseAttempt(undefined), parseAttempt("0"), parseAttempt("-2"), parseAttempt("5")]).toEqual([
      1, 1, 1, 5,
    ]);
  });
});
