import { ConfigError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { endpointOf, parseArtemisConfig, redactConfig } from "../src/index.js";

describe("parseArtemisConfig", () => {
  it("fills every default and freezes the result", () => {
    const config = parseArtemisConfig({});
    expect(config).toEqual({
      url: "stomp://127.0.0.1:61613",
      heartbeatMs: 5_000,
      connectTimeoutMs: 10_000,
      receiptTimeoutMs: 10_000,
      reconnectDelayMs: 200,
      maxReconnectDelayMs: 5_000,
      adminTimeoutMs: 10_000,
      prefetchBytesPerMessage: 2048,
      maxMessageBytes: 10_485_760,
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it("takes credentials from the URL unless given explicitly", () => {
    expect(endpointOf(parseArtemisConfig({ url: "stomp://ann:s3cret@broker:61614" }))).toEqual({
      host: "broker",
      port: 61614,
      login: "ann",
      passcode: "s3cret",
    });
    expect(
      endpointOf(parseArtemisConfig({ url: "stomp://ann:x@broker", login: "bob", passcode: "y" })),
    ).toMatchObject({
      port: 61613,
      login: "bob",
      passcode: "y",
    });
  });

  it("redacts secrets when printed", () => {
    const printed = JSON.stringify(
      redactConfig(parseArtemisConfig({ url: "stomp://ann:s3cret@broker:1", passcode: "p4ss" })),
    );
    expect(printed).not.toContain("s3cret");
    expect(printed).not.toContain("p4ss");
    expect(printed).toContain("<redacted>");
  });

  it("reports every issue with its path and never echoes a secret", () => {
    let thrown: unknown;
    try {
      parseArtemisConfig({ url: "amqp://ann:s3cret@broker", heartbeatMs: -1, bogus: 1 });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    const error = thrown as ConfigError;
    expect(error.issues.map((i) => i.path).sort()).toEqual(["bogus", "heartbeatMs", "url"].sort());
    expect(error.message).not.toContain("s3cret");
  });
});
