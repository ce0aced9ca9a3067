import { openMemoryLineageDatabase } from "@factflow/lineage";
import type { LineageRow, LineageStatus } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { uuidv7 } from "../src/ids.js";
import { invocationsOfSettledMessages } from "../src/lineage/dead-invocations.js";

const EXECUTION = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

const ids = new Map<string, string>();
const idOf = (name: string): string => {
  if (!ids.has(name)) ids.set(name, uuidv7());
  return ids.get(name) as string;
};

function row(name: string, kind: LineageRow["kind"], messageId: string, status: LineageStatus): LineageRow {
  return {
    id: idOf(name),
    executionId: EXECUTION,
    kind,
    route: "sink",
    ...(kind === "adapter" ? { adapter: "sink", adapterIndex: 0 } : {}),
    messageId,
    correlationId: "c",
    attempt: 1,
    status,
    startedAt: new Date().toISOString(),
  };
}

describe("invocationsOfSettledMessages (cluster takeover)", () => {
  it("names the open adapter rows of settled messages only", async () => {
    const { lineage } = openMemoryLineageDatabase();
    // m1 settled by a live server after the dead one left its invocation a1 open.
    lineage.record(row("m1", "message", "msg-1", "completed"));
    lineage.record(row("a1", "adapter", "msg-1", "processing"));
    lineage.record(row("a1b", "adapter", "msg-1", "completed"));
    // m2 still open: its invocation may be live (or its message still waits on the broker).
    lineage.record(row("m2", "message", "msg-2", "processing"));
    lineage.record(row("a2", "adapter", "msg-2", "processing"));
    // An adapter row without a message row: nothing proves it dead.
    lineage.record(row("a3", "adapter", "msg-3", "processing"));
    // A failed message settled too.
    lineage.record(row("m4", "message", "msg-4", "failed"));
    lineage.record(row("a4", "adapter", "msg-4", "initiated"));
    await lineage.flush();
    expect((await invocationsOfSettledMessages(lineage, EXECUTION)).sort()).toEqual(
      [idOf("a1"), idOf("a4")].sort(),
    );
  });
});
