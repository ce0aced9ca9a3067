import { appendFileSync } from "node:fs";
import type { AdapterDefinition, JsonValue } from "@factflow/protocols";
import { bodyOf, type FateMix, fateOf, type ModelBody } from "./shape.js";

/** What each execution's sinks saw: execution id → route → keys (batches flattened). */
export const sunk = new Map<string, Map<string, string[]>>();

/** Told of every in-memory sink write, with the execution's count of sunk keys so far. */
export const sinkWatchers = new Set<(executionId: string, keys: number) => void>();

/**
 * While set, every rule passes: a replay with the failures fixed. Cases run one at a time, so a flag
 * set around the replay (whose execution id is not known before it starts running) is enough.
 */
export const healing = { active: false };

function keysOf(message: JsonValue): string[] {
  const body = message as { k?: string; items?: JsonValue[] };
  if (Array.isArray(body.items)) return body.items.flatMap(keysOf);
  return typeof body.k === "string" ? [body.k] : [];
}

function abortable(signal: AbortSignal): Promise<never> {
  return new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

/**
 * The model's adapters. `model.rule` fails by the message key's fate; `model.expand` turns a message
 * into `{ items: [...] }` of `count` children for the built-in `split`; `model.sink` records keys.
 */
export const modelAdapters: AdapterDefinition[] = [
  {
    type: "model.rule",
    description: "fails, throws, times out or ends the chain by the message key's fate",
    mayEndChain: true,
    create: (config) => {
      const { salt, mix } = config as unknown as { salt: number; mix: FateMix };
      return {
        type: "model.rule",
        process(ctx) {
          const body = ctx.message as unknown as ModelBody;
          if (healing.active) return { data: ctx.message };
          const fate = fateOf(salt, mix, body.k);
          switch (fate.kind) {
            case "empty":
              return { data: null };
            case "permanent":
              return { data: null, error: `permanent failure of ${body.k}`, retryable: false };
            case "transient":
              return ctx.attempt <= fate.times
                ? { data: null, error: `transient failure of ${body.k} (attempt ${ctx.attempt})` }
                : { data: ctx.message };
            case "throw":
              if (ctx.attempt <= fate.times) throw new Error(`thrown for ${body.k} (attempt ${ctx.attempt})`);
              return { data: ctx.message };
            case "timeout":
              return ctx.attempt <= fate.times ? abortable(ctx.signal) : { data: ctx.message };
            default:
              return { data: ctx.message };
          }
        },
      };
    },
  },
  {
    type: "model.expand",
    description: "replaces a message by { items } of `count` child bodies (for split)",
    create: (config) => {
      const { count } = config as { count: number };
      return {
        type: "model.expand",
        process(ctx) {
          const { k } = ctx.message as unknown as ModelBody;
          const items = Array.from({ length: count }, (_, i) => bodyOf(`${k}.${i}`) as unknown as JsonValue);
          return { data: { items } };
        },
      };
    },
  },
  {
    type: "model.sink",
    description: "records the keys it receives, per execution and route (in memory, or in `config.file`)",
    create: (config) => ({
      type: "model.sink",
      process(ctx) {
        if (typeof config.file === "string") {
          // Another process runs the pipeline: one line per key, `route key`, one write per message.
          const lines = keysOf(ctx.message).map((k) => `${ctx.route} ${k}\n`);
          appendFileSync(config.file, lines.join(""));
          return { data: null };
        }
        const routes = sunk.get(ctx.executionId) ?? new Map<string, string[]>();
        sunk.set(ctx.executionId, routes);
        const keys = routes.get(ctx.route) ?? [];
        keys.push(...keysOf(ctx.message));
        routes.set(ctx.route, keys);
        if (sinkWatchers.size > 0) {
          let total = 0;
          for (const k of routes.values()) total += k.length;
          for (const watch of sinkWatchers) watch(ctx.executionId, total);
        }
        return { data: null };
      },
    }),
  },
];
