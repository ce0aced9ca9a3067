import { ConfigError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { createEmbeddedProvider, parseEmbeddedConfig } from "../src/index.js";

describe("embedded config", () => {
  it("fills every default and freezes the result", () => {
    const config = parseEmbeddedConfig(undefined);
    expect(config).toEqual({
      mode: "memory",
      dataDir: ".factflow/queue",
      fsync: true,
      groupCommitMs: 2,
      groupCommitMaxBytes: 1_048_576,
      compactAfterBytes: 67_108_864,
      memoryBudgetBytes: 16_777_216,
      defaultPrefetch: 10,
      maxMessageBytes: 4_194_304,
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it("reports every invalid field with its path", () => {
    let error: unknown;
    try {
      parseEmbeddedConfig({ mode: "disk", groupCommitMs: -1, extra: true });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const paths = (error as ConfigError).issues.map((i) => i.path).sort();
    expect(paths).toEqual(["extra", "groupCommitMs", "mode"]);
    expect((error as ConfigError).message).toContain("[factflow/embedded]");
  });

  it("declares capabilities that follow the mode and size limit", () => {
    const memory = createEmbeddedProvider();
    const file = createEmbeddedProvider({ mode: "file", maxMessageBytes: 1024 });
    expect(memory.name).toBe("embedded");
    expect(memory.capabilities).toMatchObject({
      durable: false,
      fifo: true,
      messageGroups: true,
      priorities: true,
    });
    expect(file.capabilities).toMatchObject({
      durable: true,
      maxMessageBytes: 1024,
      retryDelay: "exponential",
    });
  });
});
