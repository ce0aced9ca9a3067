/**
 * `pnpm bench hop-cpu [N] [rounds]`: the engine's own CPU per message hop, lineage excluded.
 *
 * Three modes relay N messages through three hops (concurrency 16 per hop) on the embedded provider
 * in memory mode, and report the process CPU time per hop (user + system, all threads, over 3 × N
 * hops):
 *
 * - `provider`: the bare provider, hand-written: N publishes to `h1`, and consumers relaying
 *   `h1 → h2 → h3`. What the broker itself costs per hop.
 * - `engine`: `@factflow/engine` running the `pnpm bench peer` pipeline (a `seed` route splitting N
 *   items onto `hop1 → hop2 → hop3`, passthrough adapters) with a counting lineage: a
 *   `LineageProtocol` that keeps only which rows are open, the least the completion gate needs. Every
 *   lineage call the engine makes still happens; what the rows cost to keep is left out.
 * - `engine-memory`: the same with the in-memory lineage store (`lineage: memory`), for comparison.
 *
 * `engineOwnCpuUsPerHop` = engine − provider: what the engine adds to the broker per hop, the figure
 * the goal (≤ 15 µs) is about. Rounds alternate between the modes, so load on a shared machine hits
 * all of them; medians are reported, with every round's figure.
 *
 * Prints one JSON line `{"bench":"hop-cpu",…}`.
 */
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { openLineageDatabase } from "@factflow/lineage";
import {
  type LineageCounters,
  type LineageProtocol,
  type LineageRow,
  type LineageUpdate,
  MessageStatus,
  OPEN_LINEAGE_STATUSES,
} from "@factflow/protocols";
import { median } from "./_stats.js";
import { engineRound } from "./peer.js";

const CONCURRENCY = 16;
const GOAL_US = 15;
const OPEN: ReadonlySet<string> = new Set(OPEN_LINEAGE_STATUSES);

/**
 * Lineage reduced to what completion needs: the open rows of each execution. Queries answer empty;
 * it is a measuring device for this bench, not a store.
 */
export class CountingLineage implements LineageProtocol {
  /** Open row id → its execution. */
  readonly #open = new Map<string, string>();
  readonly #openPerExecution = new Map<string, number>();
  #written = 0;

  record(row: LineageRow): void {
    this.#written++;
    const wasOpen = this.#open.has(row.id);
    if (OPEN.has(row.status)) {
      if (wasOpen) return;
      this.#open.set(row.id, row.executionId);
      this.#openPerExecution.set(row.executionId, (this.#openPerExecution.get(row.executionId) ?? 0) + 1);
    } else if (wasOpen) this.#close(row.id);
  }

  update(id: string, update: LineageUpdate): void {
    this.#written++;
    if (!OPEN.has(update.status) && this.#open.has(id)) this.#close(id);
  }

  #close(id: string): void {
    const executionId = this.#open.get(id) as string;
    this.#open.delete(id);
    this.#openPerExecution.set(executionId, (this.#openPerExecution.get(executionId) ?? 1) - 1);
  }

  async registerPending(rows: readonly LineageRow[]): Promise<void> {
    for (const row of rows) this.record(row);
  }

  async flush(): Promise<void> {}

  async countOpen(executionId: string): Promise<number> {
    return this.#openPerExecution.get(executionId) ?? 0;
  }

  counters(): LineageCounters {
    return { written: this.#written, retriedWrites: 0, lost: 0, queued: 0 };
  }

  async rows() {
    return { total: 0, items: [] };
  }

  async countsByRoute() {
    return [];
  }

  async tree() {
    return { items: [], truncated: false };
  }

  async routeInputs() {
    return [];
  }

  async close(): Promise<void> {}
}

/** N messages through three hops of bare provider consumers; CPU µs per hop. */
async function providerRound(n: number): Promise<number> {
  const queue = createEmbeddedProvider({ mode: "memory" });
  await queue.connect();
  try {
    let arrived = 0;
    let done!: () => void;
    const finished = new Promise<void>((resolve) => {
      done = resolve;
    });
    const hops = ["h1", "h2", "h3"];
    for (let i = 0; i < hops.length; i++) {
      const next = hops[i + 1];
      await queue.subscribe(
        `/queue/bench/${hops[i]}`,
        async (delivery) => {
          if (next !== undefined)
            await queue.publish(`/queue/bench/${next}`, {
              body: delivery.message.body,
              correlationId: delivery.message.correlationId,
            });
          else if (++arrived === n) done();
          return MessageStatus.ACKNOWLEDGED;
        },
        { subscription: hops[i] as string, concurrency: CONCURRENCY, prefetch: CONCURRENCY },
      );
    }
    const cpu = process.cpuUsage();
    for (let index = 0; index < n; index++) await queue.publish("/queue/bench/h1", { body: { index } });
    await finished;
    return cpuUsPerHop(cpu, n);
  } finally {
    await queue.close();
  }
}

function cpuUsPerHop(start: NodeJS.CpuUsage, n: number): number {
  const used = process.cpuUsage(start);
  return (used.user + used.system) / (n * 3);
}

const round1 = (value: number) => Math.round(value * 10) / 10;

export async function run(args: string[]): Promise<void> {
  const n = Number(args[0] ?? 20_000);
  const rounds = Number(args[1] ?? 7);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`[factflow/bench] hop-cpu: N must be a positive integer, got "${args[0]}"`);
  if (!Number.isInteger(rounds) || rounds < 1)
    throw new Error(`[factflow/bench] hop-cpu: rounds must be a positive integer, got "${args[1]}"`);
  const memory = await openLineageDatabase({ memory: true });
  const counting = { lineage: new CountingLineage(), executions: memory.executions };
  const provider: number[] = [];
  const engine: number[] = [];
  const engineMemory: number[] = [];
  const started = performance.now();
  try {
    // Warm-up: the JIT sees every path before anything is measured.
    await providerRound(1000);
    await engineRound(1000, counting);
    await engineRound(1000, memory);
    for (let round = 0; round < rounds; round++) {
      provider.push(await providerRound(n));
      const withCounting = await engineRound(n, counting);
      engine.push((withCounting.cpuMs * 1000) / (n * 3));
      const withMemory = await engineRound(n, memory);
      engineMemory.push((withMemory.cpuMs * 1000) / (n * 3));
    }
  } finally {
    await memory.close();
  }
  const providerUs = median(provider);
  const engineUs = median(engine);
  console.log(
    JSON.stringify({
      bench: "hop-cpu",
      n,
      rounds,
      hops: 3,
      concurrencyPerHop: CONCURRENCY,
      provider: "embedded-memory",
      engineOwnCpuUsPerHop: round1(engineUs - providerUs),
      goalUs: GOAL_US,
      engineCpuUsPerHop: round1(engineUs),
      providerCpuUsPerHop: round1(providerUs),
      engineWithMemoryLineageCpuUsPerHop: round1(median(engineMemory)),
      roundsEngine: engine.map(round1),
      roundsProvider: provider.map(round1),
      roundsEngineMemory: engineMemory.map(round1),
      seconds: Math.round((performance.now() - started) / 1000),
      loadAverage1m: round1(loadavg()[0] ?? 0),
    }),
  );
}
