import { ConfigError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { parseRedisConfig, redactUrl } from "../src/index.js";

describe("parseRedisConfig", () => {
  it("fills every default and freezes the result", () => {
    const config = parseRedisConfig({});
    expect(config).toEqual({
      url: "redis://127.0.0.1:6379",
      keyPrefix: "factflow:",
      visibilityTimeoutMs: 30_000,
      blockMs: 2_000,
      commandTimeoutMs: 10_000,
      connectTimeoutMs: 10_000,
      delayPollMs: 500,
      maxMessageBytes: 16_777_216,
      connectionName: "factflow",
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it("refuses a non-Redis URL, a prefix with braces and unknown fields, naming each", () => {
    let error: unknown;
    try {
      parseRedisConfig({ url: "amqp://x", keyPrefix: "a{b}", bogus: 1 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const text = String((error as Error).message) + JSON.stringify((error as ConfigError).issues);
    expect(text).toMatch(/redis:\/\//);
    expect(text).toMatch(/keyPrefix/);
    expect(text).toMatch(/bogus/);
  });

  it("never shows the password of the URL", () => {
    expect(redactUrl("redis://user:s3cret@host:6379/0")).toBe("redis://user:<redacted>@host:6379/0");
    let error: unknown;
    try {
      parseRedisConfig({ url: "redis://:s3cret@host:6379", blockMs: -1 });
    } catch (e) {
      error = e;
    }
    expect(JSON.stringify((error as ConfigError).issues)).not.toContain("s3cret");
  });
});
