import type { AdapterDefinition, AdapterResult, JsonValue, StatefulAdapter } from "@factflow/protocols";

/**
 * `section_batch` (stateful fan-in): collects `size` enriched sections into one batch. A partial
 * batch is emitted by the engine's flush when the route drains. The route's `concurrency` must be
 * at least `size`, because every section of an unemitted batch holds its delivery open.
 */
export const batch: AdapterDefinition = {
  type: "section_batch",
  description: "Collects sections into batches of `size` (stateful fan-in)",
  validateConfig(config) {
    return config.size === undefined || (typeof config.size === "number" && config.size >= 1)
      ? []
      : ["size must be a number ≥ 1"];
  },
  create(config) {
    const size = typeof config.size === "number" ? config.size : 8;
    let items: JsonValue[] = [];
    let emitted = 0;
    const take = (): AdapterResult => {
      emitted += 1;
      const result = { data: { batch: emitted, sections: items } };
      items = [];
      return result;
    };
    const adapter: StatefulAdapter = {
      type: "section_batch",
      stateful: true,
      flushIntervalMs: typeof config.flush_interval_ms === "number" ? config.flush_interval_ms : 500,
      process(ctx) {
        items.push(ctx.message);
        return items.length >= size ? take() : { data: null };
      },
      flush() {
        return items.length === 0 ? null : take();
      },
    };
    return adapter;
  },
};

/** `batch_write`: writes one JSON artefact per batch (the storage adds its sidecar). */
export const write: AdapterDefinition = {
  type: "batch_write",
  description: "Writes each batch as a JSON artefact under docs-ingest/<execution>/",
  create(config) {
    const prefix = typeof config.prefix === "string" ? config.prefix : "docs-ingest";
    return {
      type: "batch_write",
      async process(ctx) {
        const { batch: index, sections } = ctx.message as { batch: number; sections: JsonValue[] };
        const key = `${prefix}/${ctx.executionId}/batch-${String(index).padStart(4, "0")}-${ctx.messageId.slice(0, 8)}.json`;
        await ctx.storage.put(key, `${JSON.stringify({ batch: index, sections }, null, 2)}\n`, {
          contentType: "application/json",
          executionId: ctx.executionId,
          route: ctx.route,
          lineageId: ctx.lineageId,
        });
        return { data: null, outputKeys: [key] };
      },
    };
  },
};
