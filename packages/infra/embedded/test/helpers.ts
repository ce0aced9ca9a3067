import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "@factflow/protocols";
import { afterEach } from "vitest";
import { createEmbeddedProvider, type EmbeddedConfigInput, type EmbeddedProvider } from "../src/index.js";

/** Polls `condition` until it holds or the deadline passes (then throws with `what`). */
export async function waitFor(condition: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A fresh temporary directory and a function that removes it. */
export async function tempDir(): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), "factflow-embedded-"));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

/** A logger that keeps what it is told, for assertions on warnings. */
export function recordingLogger(): Logger & {
  lines: { level: string; message: string; fields?: Record<string, unknown> }[];
} {
  const lines: { level: string; message: string; fields?: Record<string, unknown> }[] = [];
  const log =
    (level: string) =>
    (message: string, fields?: Record<string, unknown>): void => {
      lines.push(fields === undefined ? { level, message } : { level, message, fields });
    };
  const logger = {
    lines,
    debug: log("debug"),
    info: log("info"),
    warn: log("warn"),
    error: log("error"),
    child: () => logger,
  };
  return logger;
}

/**
 * Makes the providers of a test file: `create` a new one, `connected` a new connected one. Each is
 * closed after the test that made it.
 */
export function providersClosedAfterEach(): {
  create(input?: EmbeddedConfigInput): EmbeddedProvider;
  connected(input?: EmbeddedConfigInput): Promise<EmbeddedProvider>;
} {
  const made: EmbeddedProvider[] = [];
  afterEach(async () => {
    for (const provider of made.splice(0)) await provider.close();
  });
  const create = (input?: EmbeddedConfigInput) => {
    const provider = createEmbeddedProvider(input);
    made.push(provider);
    return provider;
  };
  return {
    create,
    async connected(input) {
      const provider = create(input);
      await provider.connect();
      return provider;
    },
  };
}
