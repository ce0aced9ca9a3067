import { createHash } from "node:crypto";
import { lstat, mkdir, readdir, readFile, realpath, rm, stat } from "node:fs/promises";
import { dirname, join, relative, resolve, sep } from "node:path";
import type { ArtefactSidecar, PutOptions, StorageProtocol } from "@factflow/protocols";
import { FactflowError } from "@factflow/protocols";
import { writeFileAtomic } from "./atomic-write.js";
import { assertValidKey, SIDECAR_DIR, TEMP_PREFIX } from "./storage-key.js";

/** Options of {@link createFileStorage}. */
export interface FileStorageOptions {
  /** Directory that holds every artefact; created if missing. */
  readonly root: string;
}

const SIDECAR_SUFFIX = ".json";

/** File storage, plus the housekeeping only a filesystem needs. */
export interface FileStorage extends StorageProtocol {
  /**
   * Deletes the temp files of writes that never finished (a crash between write and rename), older
   * than `olderThanMs` so a write in progress in another process is left alone. Returns how many.
   * @default olderThanMs 60_000
   */
  sweepTemporaryFiles(olderThanMs?: number): Promise<number>;
}

/**
 * `StorageProtocol` on the local filesystem. The artefact for key `a/b.txt` is `<root>/a/b.txt`;
 * its JSON sidecar is `<root>/.sidecars/a/b.txt.json`, a parallel tree, so artefact names never
 * collide with sidecar names and `list` reads sidecars only. Both are written atomically, artefact
 * first: a crash in between leaves an artefact without sidecar, which reads as absent.
 */
export function createFileStorage(options: FileStorageOptions): FileStorage {
  const root = resolve(options.root);
  let realRoot: Promise<string> | undefined;
  const ensureRoot = () => {
    realRoot ??= mkdir(root, { recursive: true }).then(() => realpath(root));
    return realRoot;
  };

  /** Resolves `rel` under the root, refusing paths that leave it directly or through a symlink. */
  const locate = async (rel: string, key: string, create: boolean): Promise<string | undefined> => {
    const base = await ensureRoot();
    const path = resolve(base, rel);
    if (!isInside(base, path)) throw escapes(key);
    const dir = dirname(path);
    if (create) {
      // Check the deepest existing ancestor before creating anything, so a symlinked directory
      // cannot make mkdir create folders outside the root.
      let existing = dir;
      while (existing !== base && !(await exists(existing))) existing = dirname(existing);
      const realExisting = await realpath(existing);
      if (realExisting !== base && !isInside(base, realExisting)) throw escapes(key);
      await mkdir(dir, { recursive: true });
    }
    let realDir: string;
    try {
      realDir = await realpath(dir);
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
    if (realDir !== base && !isInside(base, realDir)) throw escapes(key);
    const target = join(realDir, relative(dir, path));
    try {
      if ((await lstat(target)).isSymbolicLink()) throw escapes(key);
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    return target;
  };
  const artefactPath = (key: string, create: boolean) => locate(key, key, create);
  const sidecarPath = (key: string, create: boolean) =>
    locate(join(SIDECAR_DIR, key + SIDECAR_SUFFIX), key, create);

  const readSidecar = async (key: string): Promise<ArtefactSidecar | undefined> => {
    const path = await sidecarPath(key, false);
    if (path === undefined) return undefined;
    try {
      return JSON.parse(await readFile(path, "utf8")) as ArtefactSidecar;
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw io(`read the sidecar of "${key}"`, error);
    }
  };

  return {
    async put(key: string, data: Uint8Array | string, put: PutOptions = {}): Promise<ArtefactSidecar> {
      assertValidKey(key);
      const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
      const sidecar: ArtefactSidecar = {
        key,
        contentType:
          put.contentType ??
          (typeof data === "string" ? "text/plain; charset=utf-8" : "application/octet-stream"),
        size: bytes.byteLength,
        sha256: createHash("sha256").update(bytes).digest("hex"),
        createdAt: new Date().toISOString(),
        ...(put.executionId === undefined ? {} : { executionId: put.executionId }),
        ...(put.route === undefined ? {} : { route: put.route }),
        ...(put.lineageId === undefined ? {} : { lineageId: put.lineageId }),
      };
      try {
        const path = (await artefactPath(key, true))!;
        await writeFileAtomic(path, bytes);
        const meta = (await sidecarPath(key, true))!;
        await writeFileAtomic(meta, new TextEncoder().encode(`${JSON.stringify(sidecar, null, 2)}\n`));
      } catch (error) {
        if (error instanceof FactflowError) throw error;
        throw io(`write "${key}"`, error);
      }
      return sidecar;
    },

    async get(key: string) {
      assertValidKey(key);
      const sidecar = await readSidecar(key);
      if (sidecar === undefined) return undefined;
      const path = await artefactPath(key, false);
      if (path === undefined) return undefined;
      try {
        return { data: new Uint8Array(await readFile(path)), sidecar };
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw io(`read "${key}"`, error);
      }
    },

    async head(key: string) {
      assertValidKey(key);
      return readSidecar(key);
    },

    async list(prefix = ""): Promise<readonly ArtefactSidecar[]> {
      // Only the directory part of the prefix narrows the walk; the rest filters names.
      const slash = prefix.lastIndexOf("/");
      const dirPart = slash < 0 ? "" : prefix.slice(0, slash);
      if (dirPart !== "") assertValidKey(dirPart);
      if (prefix.includes("\0") || prefix.includes("\\")) assertValidKey(prefix);
      const base = await ensureRoot();
      const top = join(base, SIDECAR_DIR);
      const keys: string[] = [];
      const walk = async (dir: string): Promise<void> => {
        let entries: import("node:fs").Dirent[];
        try {
          entries = await readdir(dir, { withFileTypes: true });
        } catch (error) {
          if (isNotFound(error)) return;
          throw io(`list "${prefix}"`, error);
        }
        for (const entry of entries) {
          if (entry.name.startsWith(TEMP_PREFIX)) continue;
          const full = join(dir, entry.name);
          if (entry.isDirectory()) await walk(full);
          else if (entry.isFile() && entry.name.endsWith(SIDECAR_SUFFIX)) {
            const key = relative(top, full).split(sep).join("/").slice(0, -SIDECAR_SUFFIX.length);
            if (key.startsWith(prefix)) keys.push(key);
          }
        }
      };
      await walk(dirPart === "" ? top : join(top, dirPart));
      keys.sort();
      const sidecars = await Promise.all(keys.map((key) => readSidecar(key)));
      return sidecars.filter((s): s is ArtefactSidecar => s !== undefined);
    },

    async delete(key: string): Promise<boolean> {
      assertValidKey(key);
      const meta = await sidecarPath(key, false);
      const path = await artefactPath(key, false);
      const existed = (await exists(meta)) || (await exists(path));
      // Sidecar first: an interrupted delete leaves an orphan artefact, which reads as absent.
      if (meta !== undefined) await rm(meta, { force: true });
      if (path !== undefined) await rm(path, { force: true });
      return existed;
    },

    describe() {
      return `filesystem storage at ${root}`;
    },

    async sweepTemporaryFiles(olderThanMs = 60_000): Promise<number> {
      const base = await ensureRoot();
      const cutoff = Date.now() - olderThanMs;
      let removed = 0;
      const pending = [base];
      for (let dir = pending.pop(); dir !== undefined; dir = pending.pop()) {
        let entries: import("node:fs").Dirent[];
        try {
          entries = await readdir(dir, { withFileTypes: true });
        } catch (error) {
          if (isNotFound(error)) continue;
          throw io("sweep temporary files", error);
        }
        for (const entry of entries) {
          const full = join(dir, entry.name);
          if (entry.isDirectory()) pending.push(full);
          else if (entry.isFile() && entry.name.startsWith(TEMP_PREFIX)) {
            const info = await stat(full).catch(() => undefined);
            if (info === undefined || info.mtimeMs > cutoff) continue;
            await rm(full, { force: true });
            removed++;
          }
        }
      }
      return removed;
    },
  };
}

function isInside(base: string, path: string): boolean {
  return path.startsWith(base.endsWith(sep) ? base : base + sep);
}

async function exists(path: string | undefined): Promise<boolean> {
  if (path === undefined) return false;
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}

function isNotFound(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "ENOENT" || code === "ENOTDIR";
}

function escapes(key: string): FactflowError {
  return new FactflowError(
    "storage_key_invalid",
    `[factflow/storage] artefact key ${JSON.stringify(key)} resolves outside the storage root (through a symlink). ` +
      "Remove the symlink or choose another key.",
  );
}

function io(what: string, error: unknown): FactflowError {
  const reason = error instanceof Error ? error.message : String(error);
  return new FactflowError(
    "storage_error",
    `[factflow/storage] could not ${what}: ${reason}. Check the storage root's permissions and free space.`,
    {
      cause: error,
      retryable: true,
    },
  );
}
