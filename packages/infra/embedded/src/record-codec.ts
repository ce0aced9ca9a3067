import { crc32 } from "node:zlib";
import type { MessageContent, StoredMessage } from "./message.js";
import type { QueueDefinition } from "./queue-options.js";

/**
 * The log's byte format. A file starts with the 8-byte magic `FFQLOG1\n`; then records, each
 * `[u32 LE payload length][u32 LE CRC-32 of the payload][payload]`, where the payload is one JSON
 * object whose `t` says what happened:
 *
 * | t | meaning | fields |
 * |---|---|---|
 * | `p` | publish (or, after compaction, the current state of a live message) | seq, queue key, id, headers, … , body |
 * | `a` | acked: gone | seq |
 * | `r` | retry scheduled | seq, next attempt, not-before, last error |
 * | `d` | dead-lettered | seq, reason, time, attempts, last error |
 * | `v` | redriven from the DLQ with a fresh budget | seq |
 * | `x` | discarded from the DLQ | seq |
 * | `q` | queue defined at runtime | queue key, definition |
 * | `s` | durable topic subscription created | queue key |
 *
 * A publish record is written twice, its frame followed by an identical copy: the only record whose
 * loss loses a message (an acknowledgement lost means a redelivery), so damage to one of the two
 * bytes-for-bytes copies (a flipped bit) costs nothing. The reader takes the first intact one and
 * skips a copy that follows an intact frame. A log written before copies existed reads the same.
 */
export const LOG_MAGIC = Buffer.from("FFQLOG1\n", "latin1");
export const RECORD_HEADER_BYTES = 8;
/** A length above this is treated as corruption rather than a huge record. */
export const MAX_RECORD_BYTES = 512 * 1024 * 1024;

export type LogRecord =
  | {
      t: "p";
      s: number;
      q: string;
      i: string;
      h: Record<string, string>;
      c: string;
      e?: string;
      tp?: string;
      pr?: number;
      ts: string;
      a: number;
      nb: number;
      le?: string;
      n: number;
      b: unknown;
      dr?: string;
      da?: string;
      dn?: number;
    }
  | { t: "a"; s: number }
  | { t: "r"; s: number; a: number; nb: number; le?: string }
  | { t: "d"; s: number; r: string; at: string; n: number; le?: string }
  | { t: "v"; s: number }
  | { t: "x"; s: number }
  | { t: "q"; q: string; o: QueueDefinition }
  | { t: "s"; q: string };

/** Frames one JSON payload. */
export function frame(json: string): Buffer {
  const length = Buffer.byteLength(json);
  const buffer = Buffer.allocUnsafe(RECORD_HEADER_BYTES + length);
  buffer.write(json, RECORD_HEADER_BYTES, "utf8");
  buffer.writeUInt32LE(length, 0);
  buffer.writeUInt32LE(crc32(buffer.subarray(RECORD_HEADER_BYTES)), 4);
  return buffer;
}

/**
 * The publish record of a message in its current state. The body is spliced in as the JSON text it
 * already is, so it is never encoded twice.
 */
export function encodeMessage(m: StoredMessage): string {
  let json = `{"t":"p","s":${m.seq},"q":${JSON.stringify(m.queueKey)},"i":${JSON.stringify(m.id)},"h":${JSON.stringify(m.headers)},"c":${JSON.stringify(m.correlationId)}`;
  if (m.executionId !== undefined) json += `,"e":${JSON.stringify(m.executionId)}`;
  if (m.traceparent !== undefined) json += `,"tp":${JSON.stringify(m.traceparent)}`;
  if (m.priority !== undefined) json += `,"pr":${m.priority}`;
  json += `,"ts":"${m.publishedAt}","a":${m.attempt},"nb":${m.notBefore},"n":${m.bytes}`;
  if (m.lastError !== undefined) json += `,"le":${JSON.stringify(m.lastError)}`;
  if (m.dead !== undefined) {
    json += `,"dr":${JSON.stringify(m.dead.reason)},"da":"${m.dead.at}","dn":${m.dead.attempts}`;
  }
  return `${json},"b":${m.bodyJson}}`;
}

export function encodeRecord(record: Exclude<LogRecord, { t: "p" }>): string {
  return JSON.stringify(record);
}

/** The message a publish record describes. */
export function decodeMessage(r: Extract<LogRecord, { t: "p" }>): StoredMessage {
  return {
    seq: r.s,
    queueKey: r.q,
    id: r.i,
    bodyJson: JSON.stringify(r.b),
    headers: r.h,
    correlationId: r.c,
    executionId: r.e,
    traceparent: r.tp,
    priority: r.pr,
    publishedAt: r.ts,
    bytes: r.n,
    attempt: r.a,
    notBefore: r.nb,
    lastError: r.le,
    redelivered: false,
    lane: undefined,
    deliveryHeaders: undefined,
    resident: true,
    logOffset: -1,
    logLength: 0,
    nextLogOffset: -1,
    nextLogLength: 0,
    dead:
      r.dr === undefined
        ? undefined
        : { reason: r.dr, at: r.da ?? r.ts, attempts: r.dn ?? r.a, lastError: r.le },
  };
}

/**
 * The content of message `seq` from the framed publish record in `frame` (header included). Throws
 * when the bytes are not that record: a damaged log, or an offset that points elsewhere.
 */
export function decodeContent(framed: Buffer, seq: number): MessageContent {
  const length = framed.length - RECORD_HEADER_BYTES;
  const payload = framed.subarray(RECORD_HEADER_BYTES);
  if (framed.readUInt32LE(0) !== length || crc32(payload) !== framed.readUInt32LE(4)) {
    throw new Error(`the log record of message ${seq} is damaged (length or CRC mismatch)`);
  }
  const r = JSON.parse(payload.toString("utf8")) as LogRecord;
  if (r.t !== "p" || r.s !== seq) {
    throw new Error(`the log record read for message ${seq} belongs to another record`);
  }
  return {
    id: r.i,
    bodyJson: JSON.stringify(r.b),
    headers: r.h,
    correlationId: r.c,
    executionId: r.e,
    traceparent: r.tp,
    publishedAt: r.ts,
  };
}

/** A stretch of the log that held no valid record, skipped by resynchronising after it. */
export interface DamagedRange {
  readonly offset: number;
  readonly bytes: number;
  readonly problem: string;
  /**
   * The stretch is exactly one copy of a publish record whose other copy is intact right beside it:
   * nothing was lost.
   */
  readonly restored: boolean;
}

/** Outcome of scanning a log buffer. */
export interface ScanResult {
  readonly records: LogRecord[];
  /** Where each record's frame starts in the buffer (parallel to `records`). */
  readonly offsets: number[];
  /** Each record's frame length, header included (parallel to `records`). */
  readonly lengths: number[];
  /** Byte offset where valid data ends (the file length when the log ends with an intact record). */
  readonly validBytes: number;
  /** Why the bytes after `validBytes` were not accepted, when there are any (a torn or bad tail). */
  readonly problem?: string;
  /** Damage in the middle of the log, each followed by valid records again. */
  readonly damaged: readonly DamagedRange[];
}

type Attempt = { record: LogRecord; end: number } | { problem: string };

/** The record at `offset`, or why there is none. */
function readRecord(data: Buffer, offset: number): Attempt {
  if (data.length - offset < RECORD_HEADER_BYTES) return { problem: "torn record header" };
  const length = data.readUInt32LE(offset);
  const expected = data.readUInt32LE(offset + 4);
  if (length > MAX_RECORD_BYTES) return { problem: `implausible record length ${length}` };
  const end = offset + RECORD_HEADER_BYTES + length;
  if (end > data.length) return { problem: "torn record (shorter than its length)" };
  const payload = data.subarray(offset + RECORD_HEADER_BYTES, end);
  if (crc32(payload) !== expected) return { problem: "CRC mismatch" };
  let record: LogRecord;
  try {
    record = JSON.parse(payload.toString("utf8")) as LogRecord;
  } catch {
    return { problem: "record is not valid JSON" };
  }
  if (typeof record !== "object" || record === null || typeof (record as { t?: unknown }).t !== "string") {
    return { problem: "record has no type" };
  }
  return { record, end };
}

/**
 * The next offset after `from` where an intact record starts, or undefined. Candidates are cheap to
 * reject (a JSON object payload starts with `{` and ends with `}`) before the CRC is computed, so a
 * damaged stretch is skipped in about linear time.
 */
function resync(data: Buffer, from: number): number | undefined {
  for (let offset = from; offset + RECORD_HEADER_BYTES < data.length; offset++) {
    const length = data.readUInt32LE(offset);
    const end = offset + RECORD_HEADER_BYTES + length;
    if (length < 2 || end > data.length) continue;
    if (data[offset + RECORD_HEADER_BYTES] !== 0x7b || data[end - 1] !== 0x7d) continue;
    if ("record" in readRecord(data, offset)) return offset;
  }
  return undefined;
}

/** True when the intact publish frame at `next` is exactly as long as the damaged stretch before it. */
function isTwinAfter(data: Buffer, offset: number, next: number): boolean {
  const attempt = readRecord(data, next);
  return "record" in attempt && attempt.record.t === "p" && attempt.end - next === next - offset;
}

/**
 * True when the bytes right after the frame `[start, end)` are the same frame again: a publish
 * record's copy.
 */
function isCopyAt(data: Buffer, start: number, end: number): boolean {
  const copyEnd = 2 * end - start;
  return copyEnd <= data.length && data.compare(data, end, copyEnd, start, end) === 0;
}

/**
 * Reads every intact record. A bad record in the middle (a flipped byte) costs only itself: the scan
 * resynchronises at the next intact record and reports the damaged range. Damage with no intact
 * record after it is a torn or bad tail, reported with the offset where valid data ends.
 */
export function scanLog(data: Buffer): ScanResult {
  const records: LogRecord[] = [];
  const offsets: number[] = [];
  const lengths: number[] = [];
  const damaged: DamagedRange[] = [];
  if (data.length < LOG_MAGIC.length || !data.subarray(0, LOG_MAGIC.length).equals(LOG_MAGIC)) {
    return {
      records,
      offsets,
      lengths,
      validBytes: 0,
      problem:
        data.length < LOG_MAGIC.length ? "file shorter than its header" : "file does not start with FFQLOG1",
      damaged,
    };
  }
  let offset = LOG_MAGIC.length;
  /** The publish frame just read without its copy after it, as `[start, end)`, or undefined. */
  let uncopied: readonly [number, number] | undefined;
  while (offset < data.length) {
    const attempt = readRecord(data, offset);
    if ("record" in attempt) {
      const { record, end } = attempt;
      records.push(record);
      offsets.push(offset);
      lengths.push(end - offset);
      uncopied = undefined;
      if (record.t === "p" && isCopyAt(data, offset, end)) offset = 2 * end - offset;
      else {
        if (record.t === "p") uncopied = [offset, end];
        offset = end;
      }
      continue;
    }
    const next = resync(data, offset + 1);
    // Its twin precedes it (a damaged copy) or follows it (a damaged first frame): the same length.
    const twinBefore = uncopied !== undefined && uncopied[1] === offset && next === 2 * offset - uncopied[0];
    if (next === undefined)
      return { records, offsets, lengths, validBytes: offset, problem: attempt.problem, damaged };
    const twinAfter = !twinBefore && isTwinAfter(data, offset, next);
    damaged.push({
      offset,
      bytes: next - offset,
      problem: attempt.problem,
      restored: twinBefore || twinAfter,
    });
    uncopied = undefined;
    offset = next;
  }
  return { records, offsets, lengths, validBytes: offset, damaged };
}
