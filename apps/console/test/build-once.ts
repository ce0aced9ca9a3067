import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "..");

function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

/**
 * Vitest global setup: builds the console with Vite when `dist/` is missing or older than its
 * sources, so the browser tests see the current code without a manual `pnpm build`.
 */
export default function setup(): void {
  const built = join(ROOT, "dist/index.html");
  const sources = Math.max(
    newest(join(ROOT, "src")),
    statSync(join(ROOT, "index.html")).mtimeMs,
    statSync(join(ROOT, "vite.config.ts")).mtimeMs,
  );
  if (existsSync(built) && statSync(built).mtimeMs >= sources) return;
  execFileSync(
    process.execPath,
    [join(ROOT, "node_modules/vite/bin/vite.js"), "build", "--logLevel", "warn"],
    {
      cwd: ROOT,
      stdio: "inherit",
    },
  );
}
