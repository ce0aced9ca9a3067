import { readFileSync, truncateSync, writeFileSync } from "node:fs";

// The embedded provider's queue log (packages/infra/embedded/src/record-codec.ts): an 8-byte magic,
// then records framed `[u32 LE payload length][u32 LE CRC-32 of the payload][JSON payload]`, a
// publish record's frame followed by an identical copy. Read here independently of the provider, so
// a change of format breaks this test loudly.
const MAGIC_BYTES = 8;
const HEADER_BYTES = 8;

interface LogRecordInfo {
  readonly offset: number;
  readonly length: number;
  /** `p` publish, `a` ack, `r` retry, `d` dead letter, ... */
  readonly type: string;
  readonly seq?: number;
  readonly queue?: string;
  /** A publish record of a copy the engine re-published on resume (`x-factflow-reseeded`). */
  readonly reseeded?: boolean;
  /** A publish record whose frame is followed by its copy. */
  readonly copied: boolean;
}

/** Every record of the log in order (stops at the first frame that does not fit). */
export function readRecords(path: string): LogRecordInfo[] {
  const data = readFileSync(path);
  const records: LogRecordInfo[] = [];
  let offset = MAGIC_BYTES;
  while (offset + HEADER_BYTES <= data.length) {
    const length = data.readUInt32LE(offset);
    const end = offset + HEADER_BYTES + length;
    if (end > data.length) break;
    const payload = JSON.parse(data.subarray(offset + HEADER_BYTES, end).toString("utf8")) as {
      t: string;
      s?: number;
      q?: string;
      h?: Record<string, string>;
    };
    const copyEnd = 2 * end - offset;
    const copied =
      payload.t === "p" && copyEnd <= data.length && data.compare(data, end, copyEnd, offset, end) === 0;
    records.push({
      offset,
      length,
      type: payload.t,
      ...(payload.s === undefined ? {} : { seq: payload.s }),
      ...(payload.q === undefined ? {} : { queue: payload.q }),
      ...(payload.h?.["x-factflow-reseeded"] === "1" ? { reseeded: true } : {}),
      copied,
    });
    offset = copied ? copyEnd : end;
  }
  return records;
}

/** What a damage step did, for the scenario's report. */
export interface LogDamage {
  readonly description: string;
}

/**
 * A torn tail, as a crash in the middle of a write leaves it: the log loses the second half of its
 * last record (header intact, payload cut short).
 */
export function tearTail(path: string): LogDamage {
  const records = readRecords(path);
  const last = records.at(-1);
  if (last === undefined) throw new Error(`queue log ${path} holds no record to tear`);
  const size = readFileSync(path).length;
  const keep = last.offset + HEADER_BYTES + Math.floor(last.length / 2);
  truncateSync(path, keep);
  return {
    description: `cut ${size - keep} bytes off the end: last record (${last.type}${last.seq === undefined ? "" : ` seq ${last.seq}`}, ${last.length} bytes at ${last.offset}) torn in half`,
  };
}

/**
 * One flipped byte in the middle of a record in the middle of the log. The record chosen is the
 * publish record of a message still live at the kill (never acked, dead-lettered or discarded)
 * whose offset is closest to the middle of the file, and the byte is in its first frame: the damage
 * hits a message the broker still owed, which it must read from the record's copy (and report).
 * Falls back to the record in the middle of the file.
 */
export function flipByte(path: string): LogDamage {
  const records = readRecords(path);
  if (records.length < 3)
    throw new Error(`queue log ${path} has too few records (${records.length}) to damage`);
  // Acked, dead-lettered or discarded: no longer owed to a consumer.
  const settled = new Set(records.filter((r) => "adx".includes(r.type)).map((r) => r.seq));
  const data = readFileSync(path);
  const middle = data.length / 2;
  const inner = records.slice(1, -1);
  const live = inner.filter((r) => r.type === "p" && r.copied && !settled.has(r.seq));
  const candidates = live.length > 0 ? live : inner;
  const target = candidates.reduce((best, r) =>
    Math.abs(r.offset - middle) < Math.abs(best.offset - middle) ? r : best,
  );
  const at = target.offset + HEADER_BYTES + Math.floor(target.length / 2);
  data[at] = (data[at] ?? 0) ^ 0x20;
  writeFileSync(path, data);
  return {
    description: `flipped byte ${at} of ${data.length}: ${live.length > 0 ? "live " : ""}${target.type} record${target.seq === undefined ? "" : ` seq ${target.seq}`}${target.queue === undefined ? "" : ` of ${target.queue}`} (${live.length} live publish records in the log)`,
  };
}

/**
 * Messages of the execution still live in the log (published, never acked, dead-lettered or
 * discarded), per queue: how many, and how many of them are re-seeded copies. For diagnostics.
 */
export function liveMessages(path: string, executionId: string): string[] {
  const records = readRecords(path);
  const settled = new Set(records.filter((r) => "adx".includes(r.type)).map((r) => r.seq));
  const byQueue = new Map<string, { live: number; reseeded: number }>();
  for (const r of records) {
    if (r.type !== "p" || settled.has(r.seq) || r.queue?.includes(executionId) !== true) continue;
    const entry = byQueue.get(r.queue) ?? { live: 0, reseeded: 0 };
    entry.live++;
    if (r.reseeded === true) entry.reseeded++;
    byQueue.set(r.queue, entry);
  }
  return [...byQueue].map(
    ([queue, n]) =>
      `log ${queue.slice(queue.indexOf(executionId) + executionId.length + 1)}: ${n.live} live, ${n.reseeded} of them re-seeded copies`,
  );
}
