/**
 * `pnpm bench config-validation [rounds]`: how long config validation takes, and how long it makes
 * other requests wait, on a real server (embedded memory provider, PGlite).
 *
 * - `idle`: `/healthz` latency with nothing else running: the baseline of the same run;
 * - one line per config (a 1,000-route chain, a 10,000-route chain, a 10,000-route cycle, a config
 *   at the 1 MiB size limit): `POST /api/v1/configs/validate` wall time (median of `rounds`) and the
 *   `/healthz` latency (p50, p99, max) measured back to back while the validations run, with the
 *   ratio of that p99 to the idle p99.
 *
 * The server's limits are raised to 10,000 routes and 1 MiB for this run (the defaults, 1,000 routes
 * and 256 KiB, keep each synchronous step short); `limit-256KiB` is a config at the default size limit.
 *
 * `pnpm bench config-validation [rounds] loader` times `loadPipelineConfig` alone, in process, on a
 * small config, the route chains (`limit-256KiB`: the server's default size limit), and 1 MiB hostile sources (nesting 500,000 deep in flow and block
 * style, nesting behind 1 MiB of comments, an alias bomb, 100,000 keys in one map, one 1 MiB string):
 * `load_median_ms` (median of `rounds`) and `event_loop_max_ms`, the longest the event loop waited
 * while it ran (the longest synchronous step).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { adapters } from "@factflow/adapters";
import { createAdapterRegistry, loadPipelineConfig } from "@factflow/engine";
import { ConfigError, silentLogger } from "@factflow/protocols";
import { loadSettings } from "@factflow/runtime";
import { startServer } from "@factflow/server";
import { percentile } from "./_stats.js";

function routes(n: number, cycle: boolean): string {
  const lines = ["name: big", "init: { route: r0 }", "routes:"];
  for (let i = 0; i < n; i++) {
    const next = i + 1 < n ? `[q${i + 1}]` : cycle ? "[q0]" : "[]";
    lines.push(
      `  r${i}:`,
      `    inbound: { queue: q${i} }`,
      `    outbound: ${next}`,
      "    adapters: [{ type: passthrough }]",
    );
  }
  return `${lines.join("\n")}\n`;
}

/** One route whose adapter config holds ~1 MiB of small values. */
function oneMegabyte(): string {
  const items = Array.from({ length: 60_000 }, (_, i) => `k${i}: v${i}`).join(", ");
  return `name: wide\ninit: { route: a }\nroutes:\n  a:\n    inbound: { queue: a.in }\n    adapters: [{ type: log, config: { extra: { ${items} } } }]\n`.slice(
    0,
    1_048_000,
  );
}

async function healthzLatencies(base: string, until: () => boolean, min = 0): Promise<number[]> {
  const latencies: number[] = [];
  while (!until() || latencies.length < min) {
    const t = performance.now();
    await (await fetch(`${base}/healthz`)).text();
    latencies.push(performance.now() - t);
  }
  return latencies.sort((a, b) => a - b);
}

const ms = (x: number) => Math.round(x * 10) / 10;

const SMALL = `name: demo
init:
  route: start
  message: { items: [1, 2, 3] }
routes:
  start:
    inbound: { queue: start.in }
    adapters:
      - type: split
        config: { field: items }
    outbound: [collect.in]
  collect:
    inbound: { queue: collect.in, concurrency: 2 }
    adapters:
      - type: batch
        config: { size: 3 }
`;

const MiB = 1_048_576;

function hostileSources(): [string, string][] {
  const half = (MiB - 16) / 2;
  const bomb = [
    "a: &a [x, x, x, x, x, x, x, x, x]",
    "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]",
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]",
    "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]",
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]",
    "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]",
    "g: [*f, *f, *f, *f, *f, *f, *f, *f, *f]",
  ].join("\n");
  const keys: string[] = [];
  for (let i = 0, size = 0; size < MiB - 64; i++) {
    const line = `  k${i}: ${i}`;
    keys.push(line);
    size += line.length + 1;
  }
  return [
    ["deep-flow-1MiB", `x: ${"[".repeat(half)}${"]".repeat(half)}\n`],
    ["deep-block-1MiB", `x:\n  ${"- ".repeat(half)}1\n`],
    [
      "deep-after-comments-1MiB",
      `${"# padding\n".repeat((MiB - 2048) / 10)}x: ${"[".repeat(900)}${"]".repeat(900)}\n`,
    ],
    ["alias-bomb-1MiB", `${bomb}\n# ${"y".repeat(MiB - bomb.length - 8)}\n`],
    ["keys-1MiB", `x:\n${keys.join("\n")}\n`],
    ["string-1MiB", `x: "${"ab\\n".repeat((MiB - 16) / 4)}"\n`],
  ];
}

async function loaderOnly(rounds: number): Promise<void> {
  const cases: [string, string][] = [
    ["small", SMALL],
    ["chain-1000", routes(1000, false)],
    ["limit-256KiB", routes(2600, false)],
    ["chain-10000", routes(10_000, false)],
    ["size-1MiB", oneMegabyte()],
    ...hostileSources(),
  ];
  for (const [name, source] of cases) {
    const registry = createAdapterRegistry(adapters);
    const times: number[] = [];
    let answer = "";
    const delay = monitorEventLoopDelay({ resolution: 1 });
    const n = name === "small" ? rounds * 100 : rounds;
    delay.enable();
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      try {
        await loadPipelineConfig(source, { registry, maxRoutes: 10_000, maxBytes: 2 * MiB });
        answer = "valid";
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        const issue = error.issues[0];
        answer = `${issue?.path}@${issue?.line}: ${issue?.message.slice(0, 60)}`;
      }
      times.push(performance.now() - t);
    }
    delay.disable();
    times.sort((a, b) => a - b);
    console.log(
      JSON.stringify({
        bench: "config-validation",
        mode: `loader-${name}`,
        bytes: Buffer.byteLength(source),
        answer,
        load_median_ms: ms(percentile(times, 50)),
        load_max_ms: ms(times[times.length - 1] ?? 0),
        event_loop_max_ms: ms(delay.max / 1e6),
        rounds: n,
        loadavg: loadavg()[0],
      }),
    );
  }
}

export async function run(args: string[]): Promise<void> {
  const rounds = Number(args[0] ?? 3);
  if (args[1] === "loader") return loaderOnly(rounds);
  const dir = mkdtempSync(join(tmpdir(), "factflow-bench-validate-"));
  const settings = loadSettings({
    env: {},
    cwd: dir,
    overrides: {
      data_dir: join(dir, "data"),
      config_dir: dir,
      embedded_mode: "memory",
      port: 0,
      config_max_routes: 10_000,
      config_max_bytes: 1_048_576,
    },
  });
  const server = await startServer(settings, { logger: silentLogger });
  try {
    const idle = await healthzLatencies(server.url, () => true, 300);
    const idleP99 = percentile(idle, 99);
    console.log(
      JSON.stringify({
        bench: "config-validation",
        mode: "idle",
        healthz_p50_ms: ms(percentile(idle, 50)),
        healthz_p99_ms: ms(idleP99),
        healthz_max_ms: ms(idle[idle.length - 1] ?? 0),
        loadavg: loadavg()[0],
      }),
    );
    const cases: [string, string][] = [
      ["chain-1000", routes(1000, false)],
      ["limit-256KiB", routes(2600, false)],
      ["chain-10000", routes(10_000, false)],
      ["cycle-10000", routes(10_000, true)],
      ["size-1MiB", oneMegabyte()],
    ];
    for (const [name, source] of cases) {
      const walls: number[] = [];
      let done = false;
      const probe = healthzLatencies(server.url, () => done);
      let answer = "";
      for (let i = 0; i < rounds; i++) {
        const t = performance.now();
        const response = await fetch(`${server.url}/api/v1/configs/validate`, {
          method: "POST",
          headers: { "content-type": "application/yaml" },
          body: source,
        });
        const body = (await response.json()) as { valid?: boolean; issues?: { message: string }[] };
        walls.push(performance.now() - t);
        answer =
          `${response.status} valid=${body.valid} ${body.issues?.[0]?.message.slice(0, 60) ?? ""}`.trim();
      }
      done = true;
      const during = await probe;
      walls.sort((a, b) => a - b);
      console.log(
        JSON.stringify({
          bench: "config-validation",
          mode: name,
          bytes: Buffer.byteLength(source),
          answer,
          validate_median_ms: ms(percentile(walls, 50)),
          healthz_p50_ms: ms(percentile(during, 50)),
          healthz_p99_ms: ms(percentile(during, 99)),
          healthz_max_ms: ms(during[during.length - 1] ?? 0),
          healthz_samples: during.length,
          healthz_p99_vs_idle: ms(percentile(during, 99) / idleP99),
          loadavg: loadavg()[0],
        }),
      );
    }
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
