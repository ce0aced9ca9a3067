import { ConfigError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { adminUrlOf, parsePulsarConfig } from "../src/index.js";

describe("config", () => {
  it("fills the defaults and derives the admin URL from the WebSocket URL", () => {
    const config = parsePulsarConfig({});
    expect(config.url).toBe("ws://127.0.0.1:8080");
    expect(config.adminUrl).toBe("http://127.0.0.1:8080");
    expect([config.tenant, config.namespace]).toEqual(["public", "default"]);
    expect(parsePulsarConfig({ url: "wss://broker:8443/" }).adminUrl).toBe("https://broker:8443");
    expect(adminUrlOf("ws://h:1/")).toBe("http://h:1");
  });

  it("keeps an explicit admin URL", () => {
    expect(parsePulsarConfig({ adminUrl: "http://admin:9090" }).adminUrl).toBe("http://admin:9090");
  });

  it("lists every problem in one ConfigError", () => {
    let error: unknown;
    try {
      parsePulsarConfig({ url: "pulsar://127.0.0.1:6650", tenant: "no/slash", publishTimeoutMs: 0 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const issues = (error as ConfigError).issues.map((i) => i.path).sort();
    expect(issues).toEqual(["publishTimeoutMs", "tenant", "url"]);
  });
});
