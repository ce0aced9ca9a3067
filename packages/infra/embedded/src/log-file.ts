import type { FileHandle } from "node:fs/promises";
import { open, rename } from "node:fs/promises";
import { dirname } from "node:path";

/**
 * The journal's view of its file: append bytes, make them durable, swap in a compacted copy. The file
 * journal batches and orders records; this port only moves bytes, so a test can replace the disk
 * with one whose every operation completes when the test says so.
 */
export interface LogFile {
  append(data: Buffer): Promise<void>;
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

async function writeAll(handle: FileHandle, data: Buffer): Promise<void> {
  let offset = 0;
  while (offset < data.length) {
    const { bytesWritten } = await handle.write(data, offset, data.length - offset, null);
    offset += bytesWritten;
  }
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
            await writeAll(out, Buffer.concat(chunk, chunkBytes));
            chunk = [];
            chunkBytes = 0;
            sliceStart = performance.now();
          }
        }
        if (chunkBytes > 0) await writeAll(out, Buffer.concat(chunk, chunkBytes));
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
