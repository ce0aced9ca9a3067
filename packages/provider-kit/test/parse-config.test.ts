import { ConfigError } from "@factflow/protocols";
import * as v from "valibot";
import { describe, expect, it } from "vitest";
import { parseProviderConfig } from "../src/index.js";

const Schema = v.strictObject({
  url: v.optional(v.pipe(v.string(), v.startsWith("amqp://")), "amqp://127.0.0.1:5672"),
  passcode: v.optional(v.string()),
  prefetch: v.optional(v.number(), 10),
});

describe("parseProviderConfig", () => {
  it("returns the defaulted config; an absent config means {}", () => {
    expect(parseProviderConfig("demo", Schema, undefined)).toEqual({
      url: "amqp://127.0.0.1:5672",
      prefetch: 10,
    });
  });

  it("lists every issue by path and never shows the URL's password or a named secret", () => {
    const input = { url: "ftp://user:s3cret-pw@host", passcode: "hunter22", prefetch: "hunter22", extra: 1 };
    let error: unknown;
    try {
      parseProviderConfig("demo", Schema, input, [input.passcode]);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const text = JSON.stringify((error as ConfigError).issues) + (error as Error).message;
    expect(text).toContain("[factflow/demo] provider config");
    expect(text).not.toContain("s3cret-pw");
    expect(text).not.toContain("hunter22");
    expect((error as ConfigError).issues.map((i) => i.path).sort()).toEqual(["extra", "prefetch", "url"]);
  });
});
