import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

const SINK_MODULE = resolve(import.meta.dirname, "../../fixtures/cluster-sink.mjs");

/** The cluster pipeline: one init message fans out into `items` items, a slow step, a sink. */
export const PIPELINE = {
  name: "cluster",
  slow: { delayMs: 200, concurrency: 1, prefetch: 2 },
  sink: { concurrency: 2, prefetch: 4 },
} as const;

/**
 * Items one killed server may make the sink see twice, per execution it consumed: every delivery it
 * held unsettled (prefetch, at least its concurrency) on the two routes after the fan-out.
 */
export const DUPLICATE_BOUND_PER_EXECUTION =
  Math.max(PIPELINE.slow.prefetch, PIPELINE.slow.concurrency) +
  PIPELINE.slow.concurrency +
  Math.max(PIPELINE.sink.prefetch, PIPELINE.sink.concurrency) +
  PIPELINE.sink.concurrency;

/** Writes the pipeline and its sink module into `configDir`; the sink appends to `sinkFile`. */
export function writePipeline(configDir: string, sinkFile: string): void {
  mkdirSync(configDir, { recursive: true });
  copyFileSync(SINK_MODULE, join(configDir, "cluster-sink.mjs"));
  const { slow, sink } = PIPELINE;
  writeFileSync(
    join(configDir, `${PIPELINE.name}.yaml`),
    `# Written by tests/cluster: the init message's items fan out, pass a slow step and are sunk.
name: ${PIPELINE.name}
adapter_modules: [./cluster-sink.mjs]
settings:
  retry: { max_attempts: 5, initial_delay_ms: 100, max_delay_ms: 1000 }
init:
  route: split
  message: { items: [] }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [slow.in]
  slow:
    inbound: { queue: slow.in, concurrency: ${slow.concurrency}, prefetch: ${slow.prefetch} }
    adapters: [{ type: delay, config: { ms: ${slow.delayMs} } }]
    outbound: [sink.in]
  sink:
    inbound: { queue: sink.in, concurrency: ${sink.concurrency}, prefetch: ${sink.prefetch} }
    adapters: [{ type: cluster_sink, config: { file: ${JSON.stringify(sinkFile)} } }]
`,
  );
}

/** The init input of execution number `index`: items `e<index>:<n>`. */
export function inputOf(index: number, items: number): { items: string[] } {
  return { items: Array.from({ length: items }, (_, n) => `e${index}:${n}`) };
}

/** What the sink file says, counted outside Factflow. */
export interface SinkCount {
  readonly lines: number;
  readonly lost: number;
  readonly duplicates: number;
  readonly unexpected: number;
}

export function sinkLines(sinkFile: string): number {
  if (!existsSync(sinkFile)) return 0;
  const text = readFileSync(sinkFile, "utf8");
  let lines = 0;
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) lines++;
  return lines;
}

/** Counts every expected item `e<i>:<n>` (i < executions, n < items) in the sink file. */
export function countSink(sinkFile: string, executions: number, items: number): SinkCount {
  const text = existsSync(sinkFile) ? readFileSync(sinkFile, "utf8") : "";
  const seen = new Map<string, number>();
  let lines = 0;
  for (const line of text.split("\n")) {
    if (line === "") continue;
    lines++;
    seen.set(line, (seen.get(line) ?? 0) + 1);
  }
  let lost = 0;
  let duplicates = 0;
  let expectedLines = 0;
  for (let i = 0; i < executions; i++) {
    for (let n = 0; n < items; n++) {
      const count = seen.get(`e${i}:${n}`) ?? 0;
      if (count === 0) lost++;
      else duplicates += count - 1;
      expectedLines += count;
    }
  }
  return { lines, lost, duplicates, unexpected: lines - expectedLines };
}
