import { randomBytes } from "node:crypto";
import { open, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { TEMP_PREFIX } from "./storage-key.js";

/**
 * Writes `data` to `path` so readers see either the old file or the whole new one: the bytes go to a
 * temp file in the same directory (same filesystem, so rename is atomic), are synced, then renamed.
 */
export async function writeFileAtomic(path: string, data: Uint8Array): Promise<void> {
  const temp = join(dirname(path), `${TEMP_PREFIX}${randomBytes(6).toString("hex")}-${basename(path)}`);
  try {
    const handle = await open(temp, "wx", 0o644);
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true }).catch(() => {});
    throw error;
  }
}
