import { type Logger, silentLogger } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { createPostgresSqlRunner, LineageWriter, uuidv7 } from "../src/index.js";
import { row } from "./lineage-suite.js";

// A real postgres.js client aimed at a port nobody listens on: every commit fails fast.
const unreachable = () =>
  createPostgresSqlRunner("postgres://postgres@127.0.0.1:1/none", { connectTimeoutSeconds: 1 });

function capture(): { logger: Logger; errors: string[]; warnings: string[] } {
  const errors: string[] = [];
  const warnings: string[] = [];
  const logger: Logger = {
    ...silentLogger,
    warn: (m) => warnings.push(m),
    error: (m) => errors.push(m),
    child: () => logger,
  };
  return { logger, errors, warnings };
}

describe("lineage writer", () => {
  it("caps its queue: writes beyond maxQueued are counted lost and logged, never thrown", async () => {
    const runner = unreachable();
    const { logger, errors } = capture();
    const writer = new LineageWriter(runner, logger, { maxQueued: 5, attempts: 1 });
    const exec = uuidv7();
    for (let i = 0; i < 8; i++) writer.record(row(exec));
    expect(writer.counters()).toMatchObject({ lost: 3, queued: 5 });
    expect(errors[0]).toMatch(/queue full/);
    await writer.flush();
    expect(writer.counters()).toMatchObject({ lost: 8, queued: 0, written: 0 });
    await runner.close();
  });

  it("resolves a flush whose queued update was replaced by a later record", async () => {
    const runner = unreachable();
    const writer = new LineageWriter(runner, silentLogger, { attempts: 1 });
    const r = row(uuidv7());
    writer.update(r.id, { status: "completed" });
    const flushed = writer.flush();
    writer.record(r);
    await flushed;
    expect(writer.counters()).toMatchObject({ queued: 0, lost: 1 });
    await runner.close();
  });

  it("folds updates of a queued row into it and keeps the last status", async () => {
    const runner = unreachable();
    const writer = new LineageWriter(runner, silentLogger, { attempts: 1 });
    const r = row(uuidv7());
    writer.record(r);
    writer.update(r.id, { status: "processing" });
    writer.update(r.id, { status: "completed" });
    expect(writer.counters().queued).toBe(1);
    await writer.flush();
    expect(writer.counters()).toMatchObject({ lost: 1, queued: 0 });
    await writer.close();
    expect(() => writer.record(row(uuidv7()))).toThrow(/closed/);
    await runner.close();
  });
});
