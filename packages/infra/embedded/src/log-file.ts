import type { FileHandle } from "node:fs/promises";
import { open, rename } from "node:fs/promises";
import { dirname } from "node:path";

/**
 * The journal's view of its file: append bytes, make them durable, swap in a compacted copy. The file
 * journal batches and orders records; this port only moves bytes, so a test can replace the disk
 * with one whose every operation completes when the test says so.
 */
export interface LogFile {
  /** Appends `parts` in order, with one gathering write rather than a copy of them joined. */
  append(parts: readonly Buffer[]): Promise<void>;
  /** `fdatasync`: what was appended survives power loss once this resolves. */
  sync(): Promise<void>;
  /**
   * Writes `parts` to a new file, makes it durable, renames it over the log and appends there from
   * now on. `parts` is consumed as it is written (it may be produced lazily).
   */
  replace(parts: Iterable<Buffer>): Promise<void>;
  close(): Promise<void>;
}

/** When the journal wakes up: a group-commit delay, or the next macrotask. */
export interface JournalTimers {
  /** Runs `fire` after `ms` (0: on the next macrotask); returns a function that cancels it. */
  schedule(fire: () => void, ms: number): () => void;
}

export const nodeTimers: JournalTimers = {
  schedule(fire, ms) {
    if (ms === 0) {
      const immediate = setImmediate(fire);
      return () => clearImmediate(immediate);
    }
    const timeout = setTimeout(fire, ms);
    return () => clearTimeout(timeout);
  },
};

/**
 * Writes every byte of `parts`, in order. Small parts are joined (Node's `writev` costs about a
 * microsecond per buffer on the event loop, more than copying a small record); a large one goes to
 * `writev` as it is, since copying it would hold the event loop (30 ms for a 5 MB message).
 */
async function writeAll(handle: FileHandle, parts: readonly Buffer[]): Promise<void> {
  let rest: Buffer[] = gathered(parts);
  while (rest.length > 0) {
    const { bytesWritten } =
      rest.length === 1
        ? await handle.write(rest[0] as Buffer, 0, (rest[0] as Buffer).length, null)
        : await handle.writev(rest);
    rest = unwritten(rest, bytesWritten);
  }
}

/** A part at least this large is written as it is rather than copied into a joined buffer. */
const UNJOINED_BYTES = 64 * 1024;

/** `parts` with each run of small parts joined into one buffer. */
function gathered(parts: readonly Buffer[]): Buffer[] {
  const out: Buffer[] = [];
  let run: Buffer[] = [];
  let runBytes = 0;
  const endRun = () => {
    if (run.length === 1) out.push(run[0] as Buffer);
    else if (run.length > 1) out.push(Buffer.concat(run, runBytes));
    run = [];
    runBytes = 0;
  };
  for (const part of parts) {
    if (part.length >= UNJOINED_BYTES) {
      endRun();
      out.push(part);
    } else {
      run.push(part);
      runBytes += part.length;
    }
  }
  endRun();
  return out;
}

/** What of `parts` is left after the first `written` bytes went out (a short write). */
function unwritten(parts: readonly Buffer[], written: number): Buffer[] {
  let skip = written;
  let index = 0;
  while (index < parts.length && skip >= (parts[index] as Buffer).length) {
    skip -= (parts[index] as Buffer).length;
    index++;
  }
  if (index === parts.length) return [];
  const first = (parts[index] as Buffer).subarray(skip);
  return [first, ...parts.slice(index + 1)];
}

async function syncDirectory(path: string): Promise<void> {
  const dir = await open(path, "r");
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

/** Compacted copies are written in chunks of at most this size rather than one buffer of the whole log. */
const COMPACT_CHUNK_BYTES = 4 * 1024 * 1024;

/**
 * Longest stretch of encoding a compacted copy takes before it writes what it has and lets the event
 * loop run. Producing a part can mean reading a paged-out body back and encoding it again: 4 MiB of
 * parts took 100 ms and more of the main thread under a 300 000-message backlog, and every timer and
 * delivery of the process waited for it.
 */
const COMPACT_SLICE_MS = 8;

/** Parts produced between two looks at the clock (reading it for every part costs more than the part). */
const PARTS_PER_CLOCK_READ = 64;

/** The log on disk, appended through an open handle. */
export function nodeLogFile(path: string, initial: FileHandle): LogFile {
  let handle = initial;
  return {
    append: (data) => writeAll(handle, data),
    sync: () => handle.datasync(),
    async replace(parts) {
      const temp = `${path}.compact`;
      const out = await open(temp, "w");
      try {
        let chunk: Buffer[] = [];
        let chunkBytes = 0;
        let sliceStart = performance.now();
        for (const part of parts) {
          chunk.push(part);
          chunkBytes += part.length;
          if (
            chunkBytes >= COMPACT_CHUNK_BYTES ||
            (chunk.length % PARTS_PER_CLOCK_READ === 0 && performance.now() - sliceStart >= COMPACT_SLICE_MS)
          ) {
            // The write's completion comes back through the event loop: timers and I/O run first.
            await writeAll(out, chunk);
            chunk = [];
            chunkBytes = 0;
            sliceStart = performance.now();
          }
        }
        if (chunkBytes > 0) await writeAll(out, chunk);
        await out.datasync();
      } finally {
        await out.close();
      }
      await rename(temp, path);
      await syncDirectory(dirname(path));
      const previous = handle;
      handle = await open(path, "a");
      await previous.close();
    },
    close: () => handle.close(),
  };
}
