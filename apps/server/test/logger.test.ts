import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../src/logger.js";

function collect() {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n")) if (line !== "") lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, destination, text: () => JSON.stringify(lines) };
}

describe("server logger (pino)", () => {
  it("writes JSON lines with time, level name, message and fields; children add fields", () => {
    const out = collect();
    const logger = createLogger({ destination: out.destination, level: "info" });
    logger.debug("not at info");
    logger.info("started", { port: 8080 });
    logger.child({ component: "provider-embedded" }).warn("slow", { ms: 12 });
    expect(out.lines).toHaveLength(2);
    expect(out.lines[0]).toMatchObject({ level: "info", message: "started", port: 8080 });
    expect(typeof out.lines[0]?.time).toBe("string");
    expect(out.lines[1]).toMatchObject({
      level: "warn",
      message: "slow",
      component: "provider-embedded",
      ms: 12,
    });
  });

  it("never writes tokens, passwords or URL passwords, wherever they appear", () => {
    const out = collect();
    const logger = createLogger({ destination: out.destination });
    logger.info("settings", {
      settings: { api_token: "tok-0123456789abcdef", database_url: "postgres://app:s3cr3t-pw@db:5432/ff" },
    });
    logger.warn("connect failed for amqp://guest:hunter2-pw@mq:5672/ (retrying)", {
      error: "cannot reach redis://:redis-pw-99@cache:6379",
      headers: { authorization: "Bearer tok-0123456789abcdef" },
    });
    logger.child({ token: "tok-0123456789abcdef" }).info("child");
    const text = out.text();
    for (const secret of ["tok-0123456789abcdef", "s3cr3t-pw", "hunter2-pw", "redis-pw-99"])
      expect(text).not.toContain(secret);
    expect(out.lines[0]).toMatchObject({
      settings: { api_token: "<redacted>", database_url: "postgres://app:<redacted>@db:5432/ff" },
    });
    expect(out.lines[1]?.message).toBe("connect failed for amqp://guest:<redacted>@mq:5672/ (retrying)");
  });
});
