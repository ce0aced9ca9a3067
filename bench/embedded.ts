/**
 * `pnpm bench embedded [N]`: publishes and consumes N messages through one queue of the embedded
 * provider, in memory mode and in file mode (group-committed fsync), and through a raw in-process
 * baseline: an array queue drained by a microtask consumer doing the same JSON encode/decode.
 *
 * The publisher keeps up to WINDOW messages published and not yet consumed, without awaiting each
 * publish (a publish resolves once the message is durable, so awaiting each one alone would measure
 * the fsync, not the broker). Latency is publish call → handler start. Ends with one JSON line per
 * mode.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createEmbeddedProvider, type EmbeddedConfigInput } from "@factflow/infra-embedded";

const WINDOW = 1_000;
const CONCURRENCY = 8;

interface Measured {
  msgsPerS: number;
  p50: number;
  p99: number;
  extra: Record<string, number>;
}

interface Transport {
  publish(body: { i: number; t: number; pad: string }): Promise<unknown>;
  consume(handler: (body: { i: number; t: number }) => Promise<void>): Promise<void>;
  close(): Promise<Record<string, number>>;
}

function percentile(sorted: Float64Array, q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

async function measure(n: number, transport: Transport): Promise<Measured> {
  const latencies = new Float64Array(n);
  let received = 0;
  let published = 0;
  let resume: (() => void) | undefined;
  let failure: unknown;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  await transport.consume(async (body) => {
    latencies[body.i] = performance.now() - body.t;
    received++;
    if (received === n) done();
    if (resume !== undefined && published - received <= WINDOW / 2) {
      const go = resume;
      resume = undefined;
      go();
    }
  });
  const pad = "x".repeat(64);
  const start = performance.now();
  // At most WINDOW messages published and not yet consumed: the same flow control for every mode,
  // so a fast publisher measures the broker, not an ever-growing backlog.
  for (let i = 0; i < n; i++) {
    if (published - received >= WINDOW) {
      await new Promise<void>((resolve) => {
        resume = resolve;
      });
    }
    published++;
    transport.publish({ i, t: performance.now(), pad }).catch((error: unknown) => {
      failure ??= error;
    });
  }
  await finished;
  const seconds = (performance.now() - start) / 1_000;
  if (failure !== undefined) throw failure;
  const extra = await transport.close();
  latencies.sort();
  return { msgsPerS: n / seconds, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), extra };
}

/** The baseline: what any in-process queue must do at least (encode, enqueue, dequeue, decode, settle). */
function baseline(): Transport {
  const queue: string[] = [];
  let head = 0;
  let handler: ((body: { i: number; t: number }) => Promise<void>) | undefined;
  let scheduled = false;
  let running = 0;
  const drain = (): void => {
    scheduled = false;
    while (handler !== undefined && head < queue.length && running < CONCURRENCY) {
      const body = JSON.parse(queue[head] as string) as { i: number; t: number };
      queue[head++] = "";
      running++;
      void handler(body).then(() => {
        running--;
        kick();
      });
    }
    if (head === queue.length) {
      queue.length = 0;
      head = 0;
    }
  };
  const kick = (): void => {
    if (!scheduled) {
      scheduled = true;
      queueMicrotask(drain);
    }
  };
  return {
    async publish(body) {
      queue.push(JSON.stringify(body));
      kick();
    },
    async consume(h) {
      handler = h;
    },
    async close() {
      return {};
    },
  };
}

async function embedded(config: EmbeddedConfigInput): Promise<Transport> {
  const provider = createEmbeddedProvider(config);
  await provider.connect();
  return {
    publish: (body) => provider.publish("/queue/bench", { body }),
    async consume(handler) {
      await provider.subscribe(
        "/queue/bench",
        async (delivery) => {
          await handler(delivery.message.body as { i: number; t: number });
          return "ACKNOWLEDGED" as const;
        },
        { subscription: "bench", prefetch: CONCURRENCY, concurrency: CONCURRENCY },
      );
    },
    async close() {
      // The last handler has started, not yet returned: let it settle before reading the store.
      await new Promise((resolve) => setTimeout(resolve, 10));
      const store = provider.storeStats();
      await provider.close();
      return {
        live_messages: store.liveMessages,
        log_mb: Math.round((store.logBytes / 1_048_576) * 10) / 10,
        commits: store.commits,
        compactions: store.compactions,
      };
    },
  };
}

export async function run(args: string[]): Promise<void> {
  const n = Number.parseInt(args[0] ?? "100000", 10);
  if (!Number.isInteger(n) || n <= 0)
    throw new Error(`[factflow/bench] N must be a positive integer, got ${args[0]}`);
  const dir = await mkdtemp(join(tmpdir(), "factflow-bench-embedded-"));
  try {
    // Warm the JIT on every path before measuring.
    const warm = Math.min(n, 5_000);
    await measure(warm, baseline());
    await measure(warm, await embedded({ mode: "memory" }));
    await measure(warm, await embedded({ mode: "file", dataDir: join(dir, "warm") }));

    const base = await measure(n, baseline());
    console.log(
      `baseline: ${Math.round(base.msgsPerS)} msgs/s, p50 ${base.p50.toFixed(2)} ms, p99 ${base.p99.toFixed(2)} ms`,
    );
    const lines: string[] = [];
    const modes: [string, EmbeddedConfigInput][] = [
      ["memory", { mode: "memory" }],
      // A small compaction threshold so the run shows the log staying bounded.
      ["file", { mode: "file", dataDir: join(dir, "file"), compactAfterBytes: 8 * 1_048_576 }],
    ];
    for (const [mode, config] of modes) {
      global.gc?.();
      const m = await measure(n, await embedded(config));
      const heapMb = Math.round(process.memoryUsage().heapUsed / 1_048_576);
      console.log(
        `${mode}: ${Math.round(m.msgsPerS)} msgs/s, p50 ${m.p50.toFixed(2)} ms, p99 ${m.p99.toFixed(2)} ms, ${JSON.stringify(m.extra)}, heap ${heapMb} MB`,
      );
      lines.push(
        JSON.stringify({
          bench: "embedded",
          mode,
          n,
          msgs_per_s: Math.round(m.msgsPerS),
          p50_ms: Number(m.p50.toFixed(3)),
          p99_ms: Number(m.p99.toFixed(3)),
          baseline_msgs_per_s: Math.round(base.msgsPerS),
          ratio: Number((m.msgsPerS / base.msgsPerS).toFixed(3)),
          heap_mb: heapMb,
          ...m.extra,
        }),
      );
    }
    for (const line of lines) console.log(line);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
