import { api } from "./http.js";
import { PIPELINE } from "./pipeline.js";

/** A lineage row as the HTTP API lists it (the fields the check reads). */
interface ApiRow {
  readonly id: string;
  readonly kind: "message" | "adapter";
  readonly route: string;
  readonly message_id: string;
  readonly parent_id: string | null;
  readonly status: string;
  // biome-ignore lint/suspicious/noExplicitAny: payloads are read as JSON.
  readonly payload: any;
}

/** What the ended execution's lineage holds, against what every item must have left. */
export interface LineageCheck {
  readonly rows: number;
  /** Per route of the items (`slow`, `batch`): items without a message row there. */
  readonly missingItems: Readonly<Record<string, number>>;
  /** Items that no `sink` message row carries. */
  readonly missingSinkItems: number;
  /** Adapter rows whose message has no message row (`GET /lineage/{message_id}` shows them alone). */
  readonly orphanAdapterRows: number;
  /** Message rows whose parent row is not stored (the tree walk stops there). */
  readonly danglingParents: number;
  /** Message rows without a parent other than the init message's (the walk cannot reach the root). */
  readonly unparented: number;
  /** Rows still open (pending, initiated, processing). */
  readonly open: number;
  /** A few examples of each gap, for the failure message. */
  readonly examples: readonly string[];
}

/** The item routes: one message per item each. */
const ITEM_ROUTES = ["slow", "batch"] as const;
const PAGE = 500;

/** Every lineage row of the execution, through `GET /api/v1/executions/{id}/lineage`. */
async function allRows(base: string, executionId: string): Promise<ApiRow[]> {
  const rows: ApiRow[] = [];
  for (let offset = 0; ; offset += PAGE) {
    const page = (await api(
      base,
      "GET",
      `/api/v1/executions/${executionId}/lineage?limit=${PAGE}&offset=${offset}`,
    )) as { total: number; items: ApiRow[] };
    rows.push(...page.items);
    if (page.items.length < PAGE) return rows;
  }
}

/**
 * Checks that the crash left every item a complete lineage: a message row on each item route, its
 * batch in a sink message row, no adapter row without its message row, every message row but the
 * init message's linked to a stored parent row (so its tree reaches the root), and nothing open.
 */
export async function checkLineage(base: string, executionId: string): Promise<LineageCheck> {
  const rows = await allRows(base, executionId);
  const ids = new Set(rows.map((r) => r.id));
  const messages = rows.filter((r) => r.kind === "message");
  const withMessageRow = new Set(messages.map((r) => r.message_id));
  const examples: string[] = [];
  const example = (text: string) => {
    if (examples.length < 12) examples.push(text);
  };

  const missingItems: Record<string, number> = {};
  for (const route of ITEM_ROUTES) {
    const items = new Set<number>();
    for (const m of messages)
      if (m.route === route && typeof m.payload?.item === "number") items.add(m.payload.item);
    let missing = 0;
    for (let i = 0; i < PIPELINE.items; i++) {
      if (items.has(i)) continue;
      missing++;
      example(`item ${i} has no message row on route ${route}`);
    }
    missingItems[route] = missing;
  }

  const sunk = new Set<number>();
  for (const m of messages) {
    if (m.route !== "sink" || !Array.isArray(m.payload?.items)) continue;
    for (const entry of m.payload.items) if (typeof entry?.item === "number") sunk.add(entry.item);
  }
  let missingSinkItems = 0;
  for (let i = 0; i < PIPELINE.items; i++) if (!sunk.has(i)) missingSinkItems++;

  let orphanAdapterRows = 0;
  for (const r of rows) {
    if (r.kind !== "adapter" || withMessageRow.has(r.message_id)) continue;
    orphanAdapterRows++;
    example(
      `adapter row ${r.id} (route ${r.route}) points at message ${r.message_id}, which has no message row`,
    );
  }

  let danglingParents = 0;
  for (const m of messages) {
    if (m.parent_id === null || ids.has(m.parent_id)) continue;
    danglingParents++;
    example(
      `message row ${m.message_id} (route ${m.route}) names parent row ${m.parent_id}, which is not stored`,
    );
  }

  let unparented = 0;
  for (const m of messages) {
    if (m.parent_id !== null || m.route === "split") continue;
    unparented++;
    example(`message row ${m.message_id} (route ${m.route}) has no parent`);
  }

  const open = rows.filter((r) => ["pending", "initiated", "processing"].includes(r.status)).length;
  return {
    rows: rows.length,
    missingItems,
    missingSinkItems,
    orphanAdapterRows,
    danglingParents,
    unparented,
    open,
    examples,
  };
}

/** `lineage gaps 0 (rows R)` or what is missing, for the summary line. */
export function lineageSummary(check: LineageCheck): string {
  const missing = Object.entries(check.missingItems)
    .map(([route, n]) => `${route} ${n}`)
    .join(", ");
  return `lineage: items without a message row ${missing}, sink ${check.missingSinkItems}; orphan adapter rows ${check.orphanAdapterRows}; dangling parents ${check.danglingParents}; without a parent ${check.unparented}; open ${check.open} (rows ${check.rows})`;
}

/** Gaps of any kind (what the suite asserts to be 0). */
export function lineageGaps(check: LineageCheck): number {
  return (
    Object.values(check.missingItems).reduce((a, b) => a + b, 0) +
    check.missingSinkItems +
    check.orphanAdapterRows +
    check.danglingParents +
    check.unparented +
    check.open
  );
}
