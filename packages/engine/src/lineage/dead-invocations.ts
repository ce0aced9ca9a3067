import type { LineageProtocol, LineageRow } from "@factflow/protocols";
import { OPEN_LINEAGE_STATUSES } from "@factflow/protocols";
import { DELIVERY_ABANDONED } from "../errors.js";

const PAGE = 10_000;

/** Every open row of an execution, of one kind or of all (after a flush, so this process's writes count). */
export async function openRowsOf(
  lineage: LineageProtocol,
  executionId: string,
  kind?: LineageRow["kind"],
): Promise<LineageRow[]> {
  const rows: LineageRow[] = [];
  for (const status of OPEN_LINEAGE_STATUSES) {
    for (let offset = 0; ; offset += PAGE) {
      const query = { status, offset, limit: PAGE };
      const page = await lineage.rows(executionId, kind === undefined ? query : { ...query, kind });
      rows.push(...page.items);
      if (page.items.length < PAGE) break;
    }
  }
  return rows;
}

/** Closes adapter rows as `abandoned`: invocations whose process stopped; their messages run again. */
export async function abandonAdapterRows(lineage: LineageProtocol, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  const finishedAt = new Date().toISOString();
  for (const id of ids) {
    lineage.update(id, {
      status: "abandoned",
      error: {
        class: DELIVERY_ABANDONED,
        message: "the process running this invocation stopped; the broker redelivers the message",
        retryable: true,
        fatal: false,
      },
      finishedAt,
    });
  }
  await lineage.flush();
}

/**
 * Open adapter rows whose message has settled for good (its message row is committed and closed).
 * A message settles once, after its one live invocation ended, so an invocation row still open
 * beside it belongs to a process that died mid-invocation while the broker gave the message to
 * another consumer, which ran and settled it. Message rows are never touched: what decides whether
 * a message still has to run stays as it was.
 */
export async function invocationsOfSettledMessages(
  lineage: LineageProtocol,
  executionId: string,
  /** Every open row of the execution, read after a flush (the adapter and message rows are read otherwise). */
  open?: readonly LineageRow[],
): Promise<string[]> {
  if (lineage.messageStatus === undefined) return [];
  if (open === undefined) await lineage.flush();
  const adapters =
    open === undefined
      ? await openRowsOf(lineage, executionId, "adapter")
      : open.filter((r) => r.kind === "adapter");
  if (adapters.length === 0) return [];
  const messageRows =
    open === undefined
      ? await openRowsOf(lineage, executionId, "message")
      : open.filter((r) => r.kind === "message");
  const openMessages = new Set(messageRows.map((r) => r.messageId));
  const candidates = adapters.filter((row) => !openMessages.has(row.messageId));
  const settled = new Map<string, boolean>();
  const dead: string[] = [];
  for (const row of candidates) {
    let closed = settled.get(row.messageId);
    if (closed === undefined) {
      const status = (await lineage.messageStatus(executionId, row.messageId))?.status;
      closed = status !== undefined && !OPEN_LINEAGE_STATUSES.includes(status);
      settled.set(row.messageId, closed);
    }
    if (closed) dead.push(row.id);
  }
  return dead;
}
