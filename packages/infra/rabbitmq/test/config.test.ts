import { ConfigError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { parseRabbitMqConfig, redactUrl } from "../src/index.js";

describe("parseRabbitMqConfig", () => {
  it("fills every default and freezes the result", () => {
    const config = parseRabbitMqConfig({});
    expect(config).toEqual({
      url: "amqp://127.0.0.1:5672",
      heartbeatSeconds: 5,
      connectTimeoutMs: 10_000,
      publishTimeoutMs: 10_000,
      reconnectInitialDelayMs: 100,
      reconnectMaxDelayMs: 5_000,
      retryQueueIdleMs: 600_000,
      maxMessageBytes: 16_777_216,
      connectionName: "factflow",
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(parseRabbitMqConfig(undefined).url).toBe("amqp://127.0.0.1:5672");
  });

  it("lists every issue with its path", () => {
    let error: unknown;
    try {
      parseRabbitMqConfig({ url: "http://x", heartbeatSeconds: 0, publishTimeoutMs: "soon", extra: 1 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const paths = (error as ConfigError).issues.map((i) => i.path).sort();
    expect(paths).toEqual(["extra", "heartbeatSeconds", "publishTimeoutMs", "url"]);
    expect((error as ConfigError).message).toContain("[factflow/rabbitmq]");
  });

  it("never prints the password of a bad URL", () => {
    let error: unknown;
    try {
      parseRabbitMqConfig({ url: "http://user:s3cret-pw@host:5672", heartbeatSeconds: -1 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).not.toContain("s3cret-pw");
    expect(JSON.stringify((error as ConfigError).issues)).not.toContain("s3cret-pw");
  });
});

describe("redactUrl", () => {
  it("replaces the password and keeps the rest", () => {
    expect(redactUrl("amqp://guest:guest@127.0.0.1:5672/vh")).toBe(
      "amqp://guest:<redacted>@127.0.0.1:5672/vh",
    );
    expect(redactUrl("amqp://127.0.0.1:5672")).toBe("amqp://127.0.0.1:5672");
    expect(redactUrl("not a url://a:b@c")).not.toContain(":b@");
  });
});
