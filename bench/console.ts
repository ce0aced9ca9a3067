/**
 * `pnpm bench console [rounds]`: how soon the web console shows its first content, read from the
 * browser's own timing (Debian's Chromium through playwright-core), on a real server (embedded
 * memory provider, PGlite) holding 100 small executions, one of 10,000 messages and one of 100,002
 * lineage rows.
 *
 * For each page, over `rounds` fresh loads (the console's assets cached after the first, as for an
 * operator): `fcp` (first contentful paint, from the paint timing), `content` (when the page's data
 * is on screen: the element named per page appears, timed with `performance.now()` inside the page,
 * so both are measured from the navigation's start), and the ratio of `content` to the baseline of
 * the same run: the "Page not found" page, which draws the shell and asks nothing of the API.
 *
 * Needs a built console (`pnpm --filter @factflow/console build`) and Chromium at /usr/bin/chromium
 * (or FACTFLOW_CHROMIUM).
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { silentLogger } from "@factflow/protocols";
import { loadSettings } from "@factflow/runtime";
import { startServer } from "@factflow/server";
import { chromium, type Page } from "playwright-core";
import { percentile } from "./_stats.js";

const CHROMIUM = process.env.FACTFLOW_CHROMIUM ?? "/usr/bin/chromium";

const WIDE = `
name: wide
init: { route: fan, message: { items: [1] } }
routes:
  fan:
    inbound: { queue: wide.fan }
    adapters:
      - type: split
        config: { field: items }
    outbound: [wide.items]
  sink:
    inbound: { queue: wide.items, concurrency: 16, prefetch: 64 }
    adapters:
      - type: passthrough
`;

/** Milliseconds from the navigation's start until `selector` matches, and until the first contentful paint. */
async function measure(page: Page, url: string, selector: string) {
  await page.goto("about:blank");
  await page.goto(url, { waitUntil: "commit" });
  // Run inside the page (as source text: this package is typed without the DOM library).
  const content = (await page.evaluate(`new Promise((resolve) => {
    const check = () => {
      if (document.querySelector(${JSON.stringify(selector)}) === null) return false;
      resolve(performance.now());
      return true;
    };
    if (check()) return;
    const observer = new MutationObserver(() => { if (check()) observer.disconnect(); });
    observer.observe(document, { childList: true, subtree: true, attributes: true });
  })`)) as number;
  // The paint entry is recorded once the frame that painted is done: wait two frames for it.
  const marks =
    (await page.evaluate(`new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(() => {
    const fcp = performance.getEntriesByName("first-contentful-paint")[0];
    resolve({ fcp: fcp === undefined ? Number.NaN : fcp.startTime });
  })))`)) as { fcp: number };
  return { content, ...marks };
}

export async function run(args: string[]): Promise<void> {
  const rounds = Number(args[0] ?? 5);
  const dist = join(dirname(fileURLToPath(import.meta.url)), "../apps/console/dist");
  if (!existsSync(join(dist, "index.html")))
    throw new Error(
      "[factflow/bench] the console is not built: run `pnpm --filter @factflow/console build` first",
    );
  if (!existsSync(CHROMIUM))
    throw new Error(
      `[factflow/bench] no Chromium at ${CHROMIUM}: apt-get install -y chromium, or set FACTFLOW_CHROMIUM`,
    );

  const dir = mkdtempSync(join(tmpdir(), "factflow-bench-console-"));
  const settings = loadSettings({
    env: {},
    cwd: dir,
    overrides: { data_dir: join(dir, "data"), embedded_mode: "memory", port: 0, max_concurrent: 50 },
  });
  const server = await startServer(settings, { logger: silentLogger });
  const base = server.url;
  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${base}/api/v1${path}`, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return (await response.json()) as Record<string, unknown>;
  };
  const start = async (items: number) => {
    for (;;) {
      const created = await call("POST", "/executions", {
        config: "wide",
        input: { items: [...Array(items).keys()] },
      });
      if (typeof created.id === "string") return created.id;
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const settled = async (id: string) => {
    while ((await call("GET", `/executions/${id}`)).status === "running")
      await new Promise((r) => setTimeout(r, 500));
  };
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--headless"] });
  try {
    await call("POST", "/configs/wide/versions", { source: WIDE });
    const large = await start(50_000);
    await settled(large);
    const tenThousand = await start(9_999);
    await settled(tenThousand);
    let last = "";
    for (let i = 0; i < 100; i++) last = await start(1);
    await settled(last);

    const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    const pages = [
      {
        name: "shell (baseline: page not found)",
        hash: "#/nothing-here",
        selector: "[data-testid=not-found]",
      },
      { name: "executions (102)", hash: "#/executions", selector: "[data-testid=executions-table] tbody tr" },
      {
        name: "execution of 10,000 messages",
        hash: `#/executions/${tenThousand}`,
        selector: '[data-testid=routes-table] tr[data-route="sink"] [data-col=completed]',
      },
      {
        name: "lineage of a 100,002-row execution",
        hash: `#/executions/${large}/lineage`,
        selector: ".vtable-row [data-testid=row-details]",
      },
    ];
    let baseline = Number.NaN;
    for (const p of pages) {
      const samples = [];
      for (let i = 0; i < rounds; i++) samples.push(await measure(page, `${base}/ui/${p.hash}`, p.selector));
      const content = samples.map((s) => s.content).sort((a, b) => a - b);
      const fcp = samples.map((s) => s.fcp).sort((a, b) => a - b);
      const median = percentile(content, 50);
      if (Number.isNaN(baseline)) baseline = median;
      console.log(
        JSON.stringify({
          bench: "console",
          page: p.name,
          rounds,
          content_ms: {
            p50: Math.round(median),
            max: Math.round(content.at(-1) ?? Number.NaN),
            // The first load, before the console's assets are in the browser's cache.
            first_load: Math.round(samples[0]?.content ?? Number.NaN),
          },
          fcp_ms: { p50: Math.round(percentile(fcp, 50)), max: Math.round(fcp.at(-1) ?? Number.NaN) },
          ratio_to_shell: Number((median / baseline).toFixed(2)),
          under_1s: (content.at(-1) ?? Number.POSITIVE_INFINITY) < 1000,
          load: loadavg()[0]?.toFixed(2),
        }),
      );
    }
  } finally {
    await browser.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
