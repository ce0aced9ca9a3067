import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { silentLogger } from "@factflow/protocols";
import { loadSettings, type SettingsInput } from "@factflow/runtime";
import { expect } from "vitest";
import { type RunningServer, startServer } from "../src/server.js";

/** The example pipeline's directory; the server serves it as its config directory. */
export const EXAMPLE_DIR = resolve(import.meta.dirname, "../../../examples/docs-ingest");
export const SAMPLE_DOCS = join(EXAMPLE_DIR, "sample-docs");
export const TOKEN = "test-token-0123456789";

/** Starts a real server on an ephemeral port with the embedded file provider and PGlite in a temp dir. */
export async function startTestServer(overrides: Partial<Record<keyof SettingsInput, string | number>> = {}) {
  const dir = mkdtempSync(join(tmpdir(), "factflow-server-"));
  const settings = loadSettings({
    env: {},
    cwd: dir,
    overrides: {
      data_dir: join(dir, "data"),
      config_dir: EXAMPLE_DIR,
      port: 0,
      api_token: TOKEN,
      ...overrides,
    },
  });
  const server: RunningServer = await startServer(settings, {
    logger: silentLogger,
    progressIntervalMs: 100,
  });
  return {
    server,
    base: server.url,
    async stop() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A response read as JSON (or text). */
export interface CallResult {
  status: number;
  headers: { get(name: string): string | null };
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes.
  body: any;
  text: string;
}

/** fetch + JSON with the bearer token (unless `auth: false`). */
export async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  options: { auth?: boolean; raw?: string; contentType?: string } = {},
): Promise<CallResult> {
  const headers: Record<string, string> = {};
  if (options.auth !== false) headers.authorization = `Bearer ${TOKEN}`;
  if (body !== undefined || options.raw !== undefined)
    headers["content-type"] = options.contentType ?? "application/json";
  const init: RequestInit = { method, headers };
  if (options.raw !== undefined) init.body = options.raw;
  else if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(`${base}${path}`, init);
  const text = await response.text();
  let json: unknown = null;
  try {
    json = text === "" ? null : JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: response.status, headers: response.headers, body: json, text };
}

/** Reads an SSE stream until the server ends it; returns the events. */
export async function readSse(
  url: string,
  lastEventId?: string,
): Promise<{ id: string; event: string; data: Record<string, unknown> }[]> {
  const response = await fetch(url, {
    headers: lastEventId === undefined ? {} : { "last-event-id": lastEventId },
  });
  if (!response.ok || response.body === null) throw new Error(`SSE answered ${response.status}`);
  const text = await response.text();
  const events: { id: string; event: string; data: Record<string, unknown> }[] = [];
  for (const block of text.split("\n\n")) {
    const fields: Record<string, string> = {};
    for (const line of block.split("\n")) {
      if (line.startsWith(":") || line === "") continue;
      const colon = line.indexOf(":");
      fields[line.slice(0, colon)] = line.slice(colon + 1).replace(/^ /, "");
    }
    if (fields.data !== undefined)
      events.push({ id: fields.id ?? "", event: fields.event ?? "message", data: JSON.parse(fields.data) });
  }
  return events;
}

/** Polls `check` until it returns a value other than undefined, or fails after `ms`. */
export async function waitFor<T>(
  check: () => Promise<T | undefined>,
  ms = 20_000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Sections written by the docs-ingest `write` route of one execution, summed over its artefacts. */
export async function sectionsInArtefacts(server: RunningServer, executionId: string): Promise<number> {
  const { storage } = server.runtime;
  let sections = 0;
  for (const sidecar of await storage.list(`docs-ingest/${executionId}/`)) {
    const artefact = await storage.get(sidecar.key);
    if (artefact === undefined) throw new Error(`artefact ${sidecar.key} is listed but missing`);
    expect(sidecar).toMatchObject({ contentType: "application/json", executionId, route: "write" });
    sections += (JSON.parse(new TextDecoder().decode(artefact.data)) as { sections: unknown[] }).sections
      .length;
  }
  return sections;
}
