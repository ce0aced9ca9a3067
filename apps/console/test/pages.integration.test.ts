import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumMissing, openBrowser, seriousViolations, type TestBrowser } from "./browser.ts";
import { type ServerProcess, startServerProcess } from "./server-process.ts";

const missing = chromiumMissing();
if (missing !== undefined && process.env.FACTFLOW_REQUIRE_SERVICES === "1") {
  throw new Error(`[console] browser tests need Chromium: ${missing}`);
}

/** One message that waits ten minutes: an execution that stays running until cancelled. */
const SLOW = `
name: slow
init: { route: wait, message: {} }
routes:
  wait:
    inbound: { queue: slow.wait }
    adapters:
      - type: delay
        config: { ms: 600000 }
`;

/** One message fans out into 300: a tree too large to show whole at a readable size. */
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
    inbound: { queue: wide.items, concurrency: 8 }
    adapters:
      - type: passthrough
`;

interface Row {
  id: string;
  kind: string;
  message_id: string;
  parent_id: string | null;
}

/** The page's rectangle of `selector` lies inside the rectangle of `box` (both must exist). */
async function inside(page: Page, selector: string, box: string): Promise<boolean> {
  return page.evaluate(
    ([s, b]) => {
      const el = document.querySelector(s as string)?.getBoundingClientRect();
      const frame = document.querySelector(b as string)?.getBoundingClientRect();
      if (el === undefined || frame === undefined) return false;
      return (
        el.left >= frame.left && el.right <= frame.right && el.top >= frame.top && el.bottom <= frame.bottom
      );
    },
    [selector, box],
  );
}

describe.skipIf(missing !== undefined)("the console's pages, in Chromium, against `factflow serve`", () => {
  const dir = mkdtempSync(join(tmpdir(), "factflow-console-pages-"));
  const env = { FACTFLOW_MAX_CONCURRENT: "2", FACTFLOW_EMBEDDED_MODE: "file" };
  let server: ServerProcess;
  let b: TestBrowser;
  let done = "";
  let wide = "";
  let slow = "";

  async function finished(id: string): Promise<void> {
    const deadline = Date.now() + 120_000;
    while ((await server.call("GET", `/executions/${id}`)).body.status === "running") {
      if (Date.now() > deadline) throw new Error(`execution ${id} still running after 120 s`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  beforeAll(async () => {
    server = await startServerProcess({ dir, env });
    for (const [name, source] of [
      ["slow", SLOW],
      ["wide", WIDE],
    ])
      expect((await server.call("POST", `/configs/${name}/versions`, { source })).status).toBe(201);
    done = (await server.call("POST", "/executions", { config: "docs-ingest", input: {} })).body.id;
    await finished(done);
    wide = (
      await server.call("POST", "/executions", { config: "wide", input: { items: [...Array(300).keys()] } })
    ).body.id;
    await finished(wide);
    slow = (await server.call("POST", "/executions", { config: "slow" })).body.id;
    b = await openBrowser();
  });
  afterAll(async () => {
    await b?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("gives every page its own title, one h1, the current nav link and no serious axe finding", async () => {
    const { page } = b;
    const fileMessage = (
      await server.call("GET", `/executions/${done}/lineage?route=split&kind=message&limit=1`)
    ).body.items[0].message_id as string;
    const sections = `/queue/${done}/docs.sections`;
    const pages: { hash: string; title: RegExp; nav?: string; ready: string }[] = [
      {
        hash: "#/executions",
        title: /^Executions · Factflow$/,
        nav: "Executions",
        ready: "executions-table",
      },
      {
        hash: `#/executions/${done}`,
        title: /^Execution [0-9a-f]{8}…[0-9a-f]{4} · Factflow$/,
        nav: "Executions",
        ready: "pipeline-graph",
      },
      {
        hash: `#/executions/${done}/lineage`,
        title: /^Lineage of execution /,
        nav: "Executions",
        ready: "lineage-rows",
      },
      {
        hash: `#/executions/${done}/lineage/${fileMessage}`,
        title: /^Lineage of message /,
        nav: "Executions",
        ready: "lineage-graph",
      },
      {
        hash: "#/dead-letters",
        title: /^Dead letters · Factflow$/,
        nav: "Dead letters",
        ready: "queues-table",
      },
      {
        hash: `#/dead-letters?destination=${encodeURIComponent(sections)}`,
        title: /^Dead letters of docs.sections · Factflow$/,
        nav: "Dead letters",
        ready: "dlq-table",
      },
      { hash: "#/system", title: /^Queues & system · Factflow$/, nav: "Queues & system", ready: "counters" },
      { hash: "#/no/such/page", title: /^Page not found · Factflow$/, ready: "not-found" },
    ];
    const titles = new Set<string>();
    for (const p of pages) {
      await page.goto(`${server.base}/ui/${p.hash}`);
      await page.getByTestId(p.ready).waitFor();
      await page.locator("[data-testid=loading]").waitFor({ state: "detached" });
      await expect.poll(() => page.title(), { timeout: 10_000 }).toMatch(p.title);
      titles.add(await page.title());
      expect(await page.locator("h1").count(), p.hash).toBe(1);
      const current = await page.locator('nav a[aria-current="page"]').allTextContents();
      expect(current, p.hash).toEqual(p.nav === undefined ? [] : [p.nav]);
      expect(await page.locator("a.skip-link").getAttribute("href")).toBe("#main");
      expect(await seriousViolations(page), p.hash).toEqual([]);
      // Every header cell names its column (a labelled checkbox counts), a finding axe rates minor.
      const unnamed = await page
        .locator("th, [role=columnheader]")
        .evaluateAll(
          (cells) =>
            cells.filter(
              (c) => (c.textContent ?? "").trim() === "" && c.querySelector("[aria-label]") === null,
            ).length,
        );
      expect(unnamed, p.hash).toBe(0);
      // Virtualised tables are tables to assistive technology, counting the rows not in the DOM.
      for (const table of await page.locator(".vtable").all()) {
        expect(await table.getAttribute("role"), p.hash).toBe("table");
        expect(await table.locator("[role=columnheader]").count(), p.hash).toBeGreaterThan(0);
        await expect.poll(() => table.locator("[role=row][aria-rowindex]").count()).toBeGreaterThan(1);
        expect(await table.getAttribute("aria-rowcount"), p.hash).toBe(
          String(Number(await table.getAttribute("data-rows")) + 1),
        );
      }
    }
    expect(titles.size).toBe(pages.length);
    // The skip link moves focus to the content without leaving the page.
    await page.goto(`${server.base}/ui/#/system`);
    await page.getByTestId("counters").waitFor();
    await page.keyboard.press("Tab");
    expect(await page.evaluate(() => document.activeElement?.className)).toBe("skip-link");
    await page.keyboard.press("Enter");
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("main");
    expect(page.url()).toMatch(/#\/system$/);
  });

  it("says so for an unknown route instead of showing the executions page", async () => {
    const { page } = b;
    for (const hash of ["#/nonsense", `#/executions/${done}/nonsense`, "#/system/extra"]) {
      await page.goto(`${server.base}/ui/${hash}`);
      await page.getByTestId("not-found").waitFor();
      expect(await page.locator("h1").textContent()).toBe("Page not found");
      expect(await page.getByTestId("executions-table").count()).toBe(0);
    }
    await page.locator('[data-testid=not-found] a[href="#/executions"]').click();
    await page.getByTestId("executions-table").waitFor();
  });

  it("never shows the previous tree under the next message's heading while it loads", async () => {
    const { page } = b;
    const fileMessage = (
      await server.call("GET", `/executions/${done}/lineage?route=split&kind=message&limit=1`)
    ).body.items[0].message_id as string;
    const rows = (await server.call("GET", `/executions/${done}/lineage/${fileMessage}`)).body.items as Row[];
    await page.goto(`${server.base}/ui/#/executions/${done}/lineage/${fileMessage}`);
    await expect
      .poll(() => page.getByTestId("lineage-summary").getAttribute("data-rows"))
      .toBe(String(rows.length));
    // A child (a section) whose node is in view, to follow its link as a user would.
    const emitters = new Set(
      rows.filter((r) => r.kind === "adapter" && r.message_id === fileMessage).map((r) => r.id),
    );
    const children = rows.filter(
      (r) => r.kind === "message" && r.parent_id !== null && emitters.has(r.parent_id),
    );
    expect(children.length).toBeGreaterThan(0);
    let child: string | undefined;
    for (const c of children) {
      if (
        await inside(
          page,
          `[data-testid=lineage-graph] g[data-node-id="${c.message_id}"]`,
          "[data-testid=lineage-graph]",
        )
      ) {
        child = c.message_id;
        break;
      }
    }
    expect(child).toBeDefined();

    // Hold the child's tree back until the page has been looked at.
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    await page.route(
      (url) => url.pathname === `/api/v1/executions/${done}/lineage/${child}`,
      async (route) => {
        await held;
        await route.continue();
      },
    );
    await page.locator(`[data-testid=lineage-graph] a:has(g[data-node-id="${child}"])`).click();
    await expect.poll(() => page.locator("h1").textContent()).toContain(child as string);
    await page.getByTestId("loading").waitFor();
    expect(await page.locator("[data-testid=lineage-graph] g.node").count()).toBe(0);
    expect(await page.getByTestId("lineage-summary").count()).toBe(0);
    expect(await page.getByTestId("lineage-tree-rows").count()).toBe(0);
    release();
    await expect
      .poll(() => page.locator("[data-testid=lineage-graph] g.node.focus").getAttribute("data-node-id"))
      .toBe(child);
    await page.unroute((url) => url.pathname === `/api/v1/executions/${done}/lineage/${child}`);
  });

  it("says when the server cut a tree at its limit", async () => {
    const { page } = b;
    const root = (await server.call("GET", `/executions/${wide}/lineage?route=fan&kind=message&limit=1`)).body
      .items[0].message_id as string;
    const path = `/api/v1/executions/${wide}/lineage/${root}`;
    // The page asks for the default limit; ask the server for 100 rows instead, to cut this tree.
    const tree = (url: URL) => url.pathname === path;
    await page.route(tree, (route) => route.continue({ url: `${server.base}${path}?limit=100` }));
    await page.goto(`${server.base}/ui/#/executions/${wide}/lineage/${root}`);
    const summary = page.getByTestId("lineage-summary");
    await expect.poll(() => summary.getAttribute("data-truncated")).toBe("true");
    expect(await summary.getAttribute("data-rows")).toBe("100");
    expect(await page.getByTestId("tree-truncated").textContent()).toContain(
      "Showing the first 100 rows of this tree",
    );
    await page.unroute(tree);
    await page.goto(`${server.base}/ui/#/executions/${wide}/lineage`);
    await page.goto(`${server.base}/ui/#/executions/${wide}/lineage/${root}`);
    await expect.poll(() => summary.getAttribute("data-truncated")).toBe("false");
    expect(await page.getByTestId("tree-truncated").count()).toBe(0);
  });

  it("draws large trees with the focused node in view, whole labels, and pans and zooms", async () => {
    const { page } = b;
    const root = (await server.call("GET", `/executions/${wide}/lineage?route=fan&kind=message&limit=1`)).body
      .items[0].message_id as string;
    await page.goto(`${server.base}/ui/#/executions/${wide}/lineage/${root}`);
    const graph = page.getByTestId("lineage-graph");
    await expect.poll(() => page.getByTestId("lineage-summary").getAttribute("data-messages")).toBe("301");
    const focus = `[data-testid=lineage-graph] g.node.focus`;
    expect(await page.locator(focus).getAttribute("data-node-id")).toBe(root);
    expect(await inside(page, focus, "[data-testid=lineage-graph]")).toBe(true);
    expect(Number(await graph.getAttribute("data-scale"))).toBeGreaterThanOrEqual(0.8);
    const labels = await page.locator("[data-testid=lineage-graph] .node-label").allTextContents();
    expect(labels.filter((l) => l.endsWith("…"))).toEqual([]);

    // Zoom with the buttons and the keyboard, pan by dragging, and come back to the focused node.
    const scale = async () => Number(await graph.getAttribute("data-scale"));
    const before = await scale();
    await page.getByTestId("zoom-in").first().click();
    expect(await scale()).toBeGreaterThan(before);
    await page.getByTestId("zoom-whole").first().click();
    expect(await scale()).toBeLessThan(before);
    await page.getByTestId("zoom-reset").first().click();
    expect(await scale()).toBe(before);
    const viewport = () => page.locator("[data-testid=lineage-graph] g.viewport").getAttribute("transform");
    const focusBox = await page.locator(focus).boundingBox();
    const start = await viewport();
    const frame = await graph.boundingBox();
    if (frame === null) throw new Error("no graph box");
    await page.mouse.move(frame.x + 20, frame.y + 20);
    await page.mouse.down();
    await page.mouse.move(frame.x + 220, frame.y + 20, { steps: 5 });
    await page.mouse.up();
    expect(await viewport()).not.toBe(start);
    const moved = await page.locator(focus).boundingBox();
    expect(moved?.x).toBeGreaterThan((focusBox?.x ?? 0) + 150);
    await graph.focus();
    await page.keyboard.press("0");
    expect(await viewport()).toBe(start);
    await page.keyboard.press("+");
    expect(await scale()).toBeGreaterThan(before);

    // The pipeline: every route and queue in view at a readable size, labels whole.
    await page.goto(`${server.base}/ui/#/executions/${done}`);
    const pipeline = page.getByTestId("pipeline-graph");
    await pipeline.locator("g.node").first().waitFor();
    const nodes = await pipeline
      .locator("g.node")
      .evaluateAll((els) => els.map((e) => e.getAttribute("data-node-id")));
    expect(nodes).toHaveLength(10);
    for (const id of nodes)
      expect(
        await inside(
          page,
          `[data-testid=pipeline-graph] g[data-node-id="${id}"]`,
          "[data-testid=pipeline-graph]",
        ),
        id ?? "",
      ).toBe(true);
    const fontPx = await pipeline
      .locator(".node-label")
      .first()
      .evaluate((el) => (el as SVGGraphicsElement).getScreenCTM()?.a ?? 0);
    expect(fontPx * 12).toBeGreaterThanOrEqual(9.5);
    const pipelineLabels = await pipeline.locator(".node-label").allTextContents();
    expect(pipelineLabels.filter((l) => l.endsWith("…"))).toEqual([]);
    await b.shot("10-pipeline");
  });

  it("counts dead letters from the server's answers, not from the page's last read", async () => {
    const { page } = b;
    const destination = `/queue/${done}/docs.sections`;
    const browse = async () =>
      (await server.call("GET", `/queues/dlq?destination=${encodeURIComponent(destination)}&limit=50`)).body;
    const first = await browse();
    expect(first.total).toBeGreaterThanOrEqual(3);
    await page.goto(`${server.base}/ui/#/dead-letters?destination=${encodeURIComponent(destination)}`);
    await expect
      .poll(() => page.getByTestId("dlq-total").getAttribute("data-total"))
      .toBe(String(first.total));
    const chosen = await page.locator("tr[data-message-id]").first().getAttribute("data-message-id");
    await page.locator(`tr[data-message-id="${chosen}"] [data-testid=redrive-one]`).click();
    await page.getByTestId("confirm-yes").click();
    await page.getByTestId("redrive-refused").waitFor();
    // Meanwhile someone else discards two others: the page's count is now stale.
    const others = (first.items as { message_id: string }[])
      .filter((l) => l.message_id !== chosen)
      .slice(0, 2);
    for (const l of others)
      expect(
        (await server.call("POST", "/queues/dlq/discard", { destination, message_id: l.message_id })).status,
      ).toBe(200);
    const now = first.total - 2;
    await page.getByTestId("redrive-force").click();
    await expect.poll(() => page.getByTestId("confirm").textContent()).toContain(`${now} → ${now - 1}`);
    await page.getByTestId("confirm-yes").click();
    await expect
      .poll(() => page.getByTestId("outcome").textContent())
      .toContain(`dead letters: ${now} → ${now - 1}`);
    expect((await browse()).total).toBe(now - 1);
  });

  it("shows the 429 notice only while every slot is taken", async () => {
    const { page } = b;
    const second = await server.call("POST", "/executions", { config: "slow" });
    expect(second.status).toBe(201);
    await page.goto(`${server.base}/ui/#/executions`);
    await page.getByTestId("start-config").selectOption("docs-ingest");
    await page.getByTestId("start-button").click();
    await page.getByTestId("busy").waitFor();
    await expect.poll(() => page.getByTestId("busy").textContent()).toContain("2 execution slots");
    await server.call("POST", `/executions/${second.body.id}/cancel`, {});
    await page.getByTestId("busy").waitFor({ state: "detached", timeout: 30_000 });
  });

  it("offers resume only for an execution that no server runs", async () => {
    const { page } = b;
    await page.goto(`${server.base}/ui/#/executions`);
    const row = page.locator(`tr[data-execution-id="${slow}"]`);
    await row.locator("[data-testid=cancel]").waitFor();
    // The list's system info has arrived (cancel shows either way; resume must not).
    await page.waitForResponse((r) => new URL(r.url()).pathname === "/api/v1/system/info");
    expect(await row.locator("[data-testid=resume]").count()).toBe(0);
    await page.goto(`${server.base}/ui/#/executions/${slow}`);
    await page.getByTestId("execution-page").waitFor();
    await page.waitForResponse((r) => new URL(r.url()).pathname === "/api/v1/system/info");
    expect(await page.getByTestId("resume").count()).toBe(0);

    // An embedded server resumes what it left running by itself when it starts again. The page
    // leaves first: a stopping server rightly answers its polls 503, which is not what this tests.
    await page.goto("about:blank");
    await server.stop();
    server = await startServerProcess({ dir, env });
    await expect
      .poll(async () => (await server.call("GET", "/system/info")).body.executions_running_here)
      .toContain(slow);
    await page.goto(`${server.base}/ui/#/executions/${slow}`);
    await page.getByTestId("cancel").waitFor();
    await page.waitForResponse((r) => new URL(r.url()).pathname === "/api/v1/system/info");
    expect(await page.getByTestId("resume").count()).toBe(0);
    await page.getByTestId("cancel").click();
    await expect.poll(() => page.getByTestId("execution-page").getAttribute("data-status")).toBe("cancelled");
    expect(b.problems.filter((p) => !p.startsWith("429 POST /api/v1/executions"))).toEqual([]);
  });
});

const RABBITMQ_URL = process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672";

/** Why RabbitMQ cannot be reached (TCP), or undefined when it can. */
function rabbitDown(): Promise<string | undefined> {
  const { hostname, port } = new URL(RABBITMQ_URL);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port || 5672), timeout: 2000 });
    socket.once("connect", () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.once("timeout", () => {
      socket.destroy();
      resolve(`${hostname}:${port} timed out`);
    });
    socket.once("error", (error) => resolve(`${hostname}:${port} ${error.message}`));
  });
}

const noRabbit = missing === undefined ? await rabbitDown() : undefined;
if (noRabbit !== undefined) {
  if (process.env.FACTFLOW_REQUIRE_SERVICES === "1")
    throw new Error(`[console] the resume test needs RabbitMQ at ${RABBITMQ_URL}: ${noRabbit}`);
  console.warn(`[console] skipping the resume test: RabbitMQ at ${RABBITMQ_URL}: ${noRabbit}`);
}

// On a broker other than the embedded one, a restarted single server leaves the executions it
// stopped running: they wait for an operator's resume.
describe.skipIf(missing !== undefined || noRabbit !== undefined)(
  "resume in the console, with RabbitMQ (a restarted server does not resume by itself)",
  () => {
    const dir = mkdtempSync(join(tmpdir(), "factflow-console-resume-"));
    const env = { FACTFLOW_PROVIDER: "rabbitmq", FACTFLOW_RABBITMQ_URL: RABBITMQ_URL };
    let server: ServerProcess;
    let b: TestBrowser;

    beforeAll(async () => {
      server = await startServerProcess({ dir, env });
      expect((await server.call("POST", "/configs/slow/versions", { source: SLOW })).status).toBe(201);
      b = await openBrowser();
    });
    afterAll(async () => {
      await b?.close();
      await server?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it("offers resume only for a running execution that no server runs", async () => {
      const { page } = b;
      const slow = (await server.call("POST", "/executions", { config: "slow" })).body.id as string;
      await page.goto(`${server.base}/ui/#/executions`);
      const row = page.locator(`tr[data-execution-id="${slow}"]`);
      await row.locator("[data-testid=cancel]").waitFor();
      await page.waitForResponse((r) => new URL(r.url()).pathname === "/api/v1/system/info");
      expect(await row.locator("[data-testid=resume]").count()).toBe(0);

      await page.goto("about:blank");
      await server.stop();
      server = await startServerProcess({ dir, env });
      expect((await server.call("GET", `/executions/${slow}`)).body.status).toBe("running");
      await page.goto(`${server.base}/ui/#/executions`);
      await page.locator(`tr[data-execution-id="${slow}"] [data-testid=resume]`).waitFor();
      await page.goto(`${server.base}/ui/#/executions/${slow}`);
      await page.getByTestId("resume").click();
      await page.getByTestId("resume").waitFor({ state: "detached" });
      expect((await server.call("GET", "/system/info")).body.executions_running_here).toContain(slow);
      await page.getByTestId("cancel").click();
      await expect
        .poll(() => page.getByTestId("execution-page").getAttribute("data-status"))
        .toBe("cancelled");
      expect(b.problems).toEqual([]);
    });
  },
);
