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
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { silentLogger } from "@factflow/protocols";
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

export async function run(args: string[]): Promise<void> {
  const rounds = Number(args[0] ?? 3);
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
