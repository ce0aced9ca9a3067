import { describe, expect, it } from "vitest";
import {
  assertIsoTimestampHeader,
  isoTimestamp,
  isStrictIsoTimestamp,
  SUBSCRIBED_AT_HEADER,
  subscribeHeaders,
} from "../src/index.js";

const AT = new Date(Date.UTC(2026, 10, 30, 3, 41, 7, 512));

describe("strict ISO-8601 timestamps on the wire", () => {
  it("formats in UTC with a Z designator", () => {
    expect(isoTimestamp(AT)).toBe("2026-11-30T03:41:07.512Z");
    expect(isStrictIsoTimestamp(isoTimestamp())).toBe(true);
  });

  it("accepts Z and numeric offsets, with or without fractional seconds", () => {
    for (const ok of [
      "2026-11-30T03:41:07Z",
      "2026-11-30T03:41:07.512Z",
      "2026-11-30T04:41:07.512+01:00",
      "2026-11-29T22:41:07-05:00",
    ])
      expect(isStrictIsoTimestamp(ok), ok).toBe(true);
  });

  it("refuses locale formats, missing zones and other near misses", () => {
    const bad = [
      AT.toLocaleString("en-US"),
      AT.toLocaleString("de-DE"),
      AT.toString(),
      AT.toUTCString(),
      "2026-11-30T03:41:07.512", // no zone: read as local time, differs per server
      "2026-11-30 03:41:07Z", // space instead of T
      "2026-11-30T03:41Z", // no seconds
      "2026-11-30T03:41:07+0100", // offset without colon
      "2026-11-30T03:41:07.512z",
      "2026-13-30T03:41:07Z",
      "2026-02-31T03:41:07Z", // not a real day
      String(AT.getTime()),
      "Invalid Date",
      "",
    ];
    for (const value of bad) expect(isStrictIsoTimestamp(value), JSON.stringify(value)).toBe(false);
    expect(() => assertIsoTimestampHeader(SUBSCRIBED_AT_HEADER, AT.toLocaleString("en-US"))).toThrow(
      /strict ISO-8601/,
    );
  });

  it("never formats an invalid date", () => {
    expect(() => isoTimestamp(new Date(Number.NaN))).toThrow(/invalid Date/);
  });

  it("every SUBSCRIBE carries the consumer's creation time in strict ISO-8601", () => {
    for (const kind of ["queue", "topic"] as const) {
      const headers = subscribeHeaders(kind, 2048, AT);
      expect(headers[SUBSCRIBED_AT_HEADER]).toBe("2026-11-30T03:41:07.512Z");
      expect(headers).toMatchObject({
        ack: "client-individual",
        "subscription-type": kind === "queue" ? "ANYCAST" : "MULTICAST",
        "consumer-window-size": "2048",
      });
      for (const [name, value] of Object.entries(headers))
        if (/(-at|timestamp|time)$/i.test(name)) expect(isStrictIsoTimestamp(value), name).toBe(true);
    }
  });
});
