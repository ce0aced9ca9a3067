import type { FileHandle } from "node:fs/promises";
import { mkdir, open, readFile, rename, rm, truncate, unlink, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { Logger } from "@factflow/protocols";
import { ProviderError } from "@factflow/protocols";
import { classifyError } from "./classify-error.js";
import { PROVIDER_NAME } from "./errors.js";
import type { StoredMessage } from "./message.js";
import type { QueueDefinition } from "./queue-options.js";
import { decodeMessage, frame, LOG_MAGIC, scanLog } from "./record-codec.js";

export const LOG_FILE = "queue.log";
const LOCK_FILE = "LOCK";

/** A torn or corrupted tail found on recovery. */
export interface CorruptTail {
  /** Byte offset in the log where valid data ended. */
  readonly offset: number;
  readonly bytes: number;
  readonly problem: string;
  /** Where the bad bytes were moved. */
  readonly movedTo: string;
}

/** Damage in the middle of the log, skipped on recovery (the records around it are kept). */
export interface DamagedLog {
  /** Damaged stretches, each followed by intact records. */
  readonly ranges: number;
  /** Of those, stretches that were one copy of a publish record whose other copy is intact. */
  readonly restored: number;
  readonly bytes: number;
  /** Where the damaged bytes were copied for inspection. */
  readonly movedTo: string;
  readonly problems: readonly string[];
}

/** The state rebuilt from the log. */
export interface RecoveredState {
  readonly definitions: Map<string, QueueDefinition>;
  readonly subscriptions: Set<string>;
  /** Live messages (waiting, scheduled, or dead-lettered), in publish order. */
  readonly messages: StoredMessage[];
  readonly maxSeq: number;
  readonly records: number;
  readonly logBytes: number;
  readonly corruptTail: CorruptTail | undefined;
  readonly damaged: DamagedLog | undefined;
}

/** Data directories this process holds, so a second provider on the same one fails fast. */
const heldHere = new Set<string>();

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
}

/**
 * Takes the data directory's lock file. Two processes appending to one log would interleave records,
 * so a lock held by a live process is an error; one left by a dead process (kill -9) is taken over.
 */
export async function acquireLock(dataDir: string): Promise<() => Promise<void>> {
  const dir = resolve(dataDir);
  if (heldHere.has(dir)) {
    throw new ProviderError(
      PROVIDER_NAME,
      "rejected",
      `data directory ${dir} is already open by another embedded provider in this process: close it first or use another dataDir`,
    );
  }
  const path = join(dir, LOCK_FILE);
  try {
    await writeFile(path, String(process.pid), { flag: "wx" });
  } catch (error) {
    if ((error as { code?: string }).code !== "EEXIST") throw classifyError(error, `locking ${path}`);
    const pid = Number.parseInt(await readFile(path, "utf8").catch(() => ""), 10);
    if (Number.isInteger(pid) && pid !== process.pid && isAlive(pid)) {
      throw new ProviderError(
        PROVIDER_NAME,
        "rejected",
        `data directory ${dir} is in use by process ${pid}: stop it, or give this provider another dataDir`,
      );
    }
    await writeFile(path, String(process.pid)).catch((e: unknown) => {
      throw classifyError(e, `taking over the stale lock ${path}`);
    });
  }
  heldHere.add(dir);
  return async () => {
    heldHere.delete(dir);
    await unlink(path).catch(() => undefined);
  };
}

function stamp(): string {
  return new Date().toISOString().replace(/[:.]/g, "-");
}

/**
 * Reads the log and rebuilds the state. A torn or corrupted tail (a crash mid-write, a flipped bit) is
 * never silently dropped: the bad bytes are moved to `queue.log.corrupt-<time>-at-<offset>`, the log
 * is cut back to its last intact record, and the caller gets the offset to report.
 */
export async function recoverLog(
  dataDir: string,
  logger: Logger,
): Promise<{ state: RecoveredState; handle: FileHandle; path: string }> {
  const dir = resolve(dataDir);
  const path = join(dir, LOG_FILE);
  try {
    await mkdir(dir, { recursive: true });
    // A compaction interrupted before its rename leaves a partial copy; the old log is authoritative.
    await rm(`${path}.compact`, { force: true });
    let data: Buffer;
    try {
      data = await readFile(path);
    } catch (error) {
      if ((error as { code?: string }).code !== "ENOENT") throw error;
      data = Buffer.alloc(0);
    }
    let corruptTail: CorruptTail | undefined;
    const scan = scanLog(data);
    let validBytes = scan.validBytes;
    // Where each record's frame starts in the log as it is after recovery.
    const offsets = scan.offsets;
    const lengths = scan.lengths;
    if (data.length === 0) {
      await writeFile(path, LOG_MAGIC);
      validBytes = LOG_MAGIC.length;
    } else if (scan.problem !== undefined) {
      const movedTo = `${path}.corrupt-${stamp()}-at-${scan.validBytes}`;
      await writeFile(movedTo, data.subarray(scan.validBytes));
      if (scan.validBytes === 0) {
        await writeFile(path, LOG_MAGIC);
        validBytes = LOG_MAGIC.length;
      } else {
        await truncate(path, scan.validBytes);
      }
      corruptTail = {
        offset: scan.validBytes,
        bytes: data.length - scan.validBytes,
        problem: scan.problem,
        movedTo,
      };
      logger.warn(
        `[factflow/embedded] queue log ${path} has a damaged tail at byte ${scan.validBytes} (${scan.problem}); ${corruptTail.bytes} bytes moved to ${movedTo}. Records after that point are not recovered.`,
        { ...corruptTail },
      );
    }
    let damaged: DamagedLog | undefined;
    if (scan.damaged.length > 0) {
      // Keep the damaged bytes for inspection, then rewrite the log from its intact records so the
      // damage is reported once, not at every start.
      const movedTo = `${path}.damaged-${stamp()}`;
      await writeFile(
        movedTo,
        Buffer.concat(scan.damaged.map((d) => data.subarray(d.offset, d.offset + d.bytes))),
      );
      const parts: Buffer[] = [LOG_MAGIC];
      let at = LOG_MAGIC.length;
      for (let i = 0; i < scan.records.length; i++) {
        const record = scan.records[i] as (typeof scan.records)[number];
        const framed = frame(JSON.stringify(record));
        offsets[i] = at;
        lengths[i] = framed.length;
        // A publish record keeps its copy (see record-codec.ts).
        const copies = record.t === "p" ? 2 : 1;
        for (let c = 0; c < copies; c++) parts.push(framed);
        at += copies * framed.length;
      }
      const rewritten = Buffer.concat(parts);
      await writeFile(`${path}.compact`, rewritten);
      await rename(`${path}.compact`, path);
      validBytes = rewritten.length;
      damaged = {
        ranges: scan.damaged.length,
        restored: scan.damaged.filter((d) => d.restored).length,
        bytes: scan.damaged.reduce((n, d) => n + d.bytes, 0),
        movedTo,
        problems: [...new Set(scan.damaged.map((d) => d.problem))],
      };
      logger.error(
        `[factflow/embedded] queue log ${path} was damaged in ${damaged.ranges} place(s) (${damaged.problems.join(", ")}); ${damaged.bytes} bytes could not be read and were copied to ${movedTo}. Every intact record around them was recovered; ${damaged.restored} of the damaged places were one copy of a publish record whose other copy was intact (nothing lost there); a message whose both copies were damaged is re-seeded from lineage when its execution resumes.`,
        { ...damaged, offsets: scan.damaged.map((d) => d.offset) },
      );
    }
    const handle = await open(path, "a");
    await handle.datasync();
    return { state: replay(scan.records, offsets, lengths, validBytes, corruptTail, damaged), handle, path };
  } catch (error) {
    throw classifyError(error, `recovering the queue log in ${dir}`);
  }
}

function replay(
  records: ReturnType<typeof scanLog>["records"],
  offsets: readonly number[],
  lengths: readonly number[],
  logBytes: number,
  corruptTail: CorruptTail | undefined,
  damaged: DamagedLog | undefined,
): RecoveredState {
  const definitions = new Map<string, QueueDefinition>();
  const subscriptions = new Set<string>();
  const messages = new Map<number, StoredMessage>();
  let maxSeq = 0;
  for (let i = 0; i < records.length; i++) {
    const record = records[i] as (typeof records)[number];
    switch (record.t) {
      case "p": {
        const message = decodeMessage(record);
        // Where its record's frame is, so that the broker can page it out and read it back.
        message.logOffset = offsets[i] as number;
        message.logLength = lengths[i] as number;
        messages.set(record.s, message);
        if (record.s > maxSeq) maxSeq = record.s;
        break;
      }
      case "a":
      case "x":
        messages.delete(record.s);
        break;
      case "r": {
        const m = messages.get(record.s);
        if (m !== undefined) {
          m.attempt = record.a;
          m.notBefore = record.nb;
          m.lastError = record.le;
        }
        break;
      }
      case "d": {
        const m = messages.get(record.s);
        if (m !== undefined) {
          m.dead = { reason: record.r, at: record.at, attempts: record.n, lastError: record.le };
          m.lastError = record.le;
        }
        break;
      }
      case "v": {
        const m = messages.get(record.s);
        if (m !== undefined) {
          m.dead = undefined;
          m.attempt = 1;
          m.notBefore = 0;
          m.lastError = undefined;
        }
        break;
      }
      case "q":
        definitions.set(record.q, record.o);
        break;
      case "s":
        subscriptions.add(record.q);
        break;
    }
  }
  const live = [...messages.values()].sort((a, b) => a.seq - b.seq);
  return {
    definitions,
    subscriptions,
    messages: live,
    maxSeq,
    records: records.length,
    logBytes,
    corruptTail,
    damaged,
  };
}
