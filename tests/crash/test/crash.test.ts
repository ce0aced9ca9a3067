import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lineageGaps } from "./harness/lineage.js";
import { flipByte, tearTail } from "./harness/queue-log.js";
import {
  cleanUp,
  removeTemplate,
  runCliScenario,
  runServerScenario,
  type ScenarioResult,
  type ServerScenario,
  summaryLine,
} from "./harness/scenario.js";
import { checkServices, createDatabase, DATABASE_URL, RABBITMQ_URL } from "./harness/services.js";

// Factflow crashed the way users crash it: a real `factflow serve` (or `factflow run`) process gets
// `kill -9` while the pipeline runs, is started again on the same data directory, and the items the
// sink appended to a file outside Factflow are counted. See docs/operations.md, "Crash tests".

const summaries: string[] = [];

/**
 * Prints the scenario's line, then asserts: completed, nothing lost, duplicates bounded, queues
 * empty, and every item's lineage complete.
 */
function check(result: ScenarioResult): void {
  const line = summaryLine(result);
  summaries.push(line);
  console.log(line);
  const why = `${line}\n${result.diagnostics}`;
  expect(result.status, why).toBe("completed");
  expect(result.sink.unexpected, why).toBe(0);
  expect(result.sink.lost, why).toBe(0);
  expect(result.sink.duplicates, why).toBeLessThanOrEqual(result.bound);
  expect(result.leftovers.messages, why).toBe(0);
  // Every item has its complete lineage: a message row on every route it took, adapter rows only
  // beside their message row, every parent stored, nothing left open.
  expect(lineageGaps(result.lineage), `${why}\n${result.lineage.examples.join("\n")}`).toBe(0);
  cleanUp(result);
}

const embedded = (name: string, rest: Omit<ServerScenario, "name" | "provider">): ServerScenario => ({
  name,
  provider: "embedded",
  ...rest,
});

afterAll(async () => {
  await removeTemplate();
  if (summaries.length > 0) console.log(`crash suite summary:\n${summaries.join("\n")}`);
});

describe("crash recovery: embedded provider (file mode), PGlite lineage", () => {
  it("kill -9 early (~10% of the items sunk)", async () => {
    check(await runServerScenario(embedded("embedded early", { killAt: [0.1] })));
  });

  it("kill -9 mid (~50%)", async () => {
    check(await runServerScenario(embedded("embedded mid", { killAt: [0.5] })));
  });

  it("kill -9 late (~90%)", async () => {
    check(await runServerScenario(embedded("embedded late", { killAt: [0.9] })));
  });

  it("kill -9 twice: at ~30%, restart, again at ~65%, restart", async () => {
    check(await runServerScenario(embedded("embedded double", { killAt: [0.3, 0.65] })));
  });

  it("kill -9 mid, then the queue log loses half of its last record (torn tail)", async () => {
    check(await runServerScenario(embedded("embedded torn tail", { killAt: [0.5], damage: tearTail })));
  });

  it("kill -9 mid, then one byte of a live publish record in the middle of the queue log flips", async () => {
    const result = await runServerScenario(
      embedded("embedded flipped byte", { killAt: [0.5], damage: flipByte }),
    );
    // The damage is reported, not hidden, and the record came back from its copy
    // (docs/providers/embedded.md).
    expect(result.readiness, result.diagnostics).toMatch(
      /^degraded .*damaged in 1 place.* 1 of the places from the record's intact copy/,
    );
    check(result);
  });

  it("factflow run killed with kill -9, then factflow executions resume (in process)", async () => {
    check(await runCliScenario("cli run + executions resume", 0.5));
  });
});

// Lineage in the machine's PostgreSQL; one database for the group, dropped afterwards. The embedded
// scenario runs first: an embedded server resumes every execution left running in its database.
const postgres = await checkServices("the PostgreSQL crash scenarios", [DATABASE_URL]);
const rabbit = await checkServices("the RabbitMQ crash scenario", [DATABASE_URL, RABBITMQ_URL]);

describe.skipIf(postgres.skip)("crash recovery with PostgreSQL lineage", () => {
  let database: Awaited<ReturnType<typeof createDatabase>> | undefined;
  beforeAll(async () => {
    if (postgres.problem !== undefined) throw new Error(`[crash] ${postgres.problem}`);
    database = await createDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it("embedded (file mode) + PostgreSQL: kill -9 mid", async () => {
    check(
      await runServerScenario(
        embedded("embedded + postgres mid", { killAt: [0.5], databaseUrl: database!.url }),
      ),
    );
  });

  it.skipIf(rabbit.skip)("RabbitMQ + PostgreSQL: kill -9 mid, restart, resume through the API", async () => {
    if (rabbit.problem !== undefined) throw new Error(`[crash] ${rabbit.problem}`);
    check(
      await runServerScenario({
        name: "rabbitmq + postgres mid",
        provider: "rabbitmq",
        killAt: [0.5],
        databaseUrl: database!.url,
      }),
    );
  });
});
