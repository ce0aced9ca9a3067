import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumMissing, openBrowser, type TestBrowser } from "./browser.ts";
import { type ServerProcess, startServerProcess } from "./server-process.ts";

const missing = chromiumMissing();
if (missing !== undefined && process.env.FACTFLOW_REQUIRE_SERVICES === "1") {
  throw new Error(`[console] browser tests need Chromium: ${missing}`);
}

/** One message fans out into `items.length` messages: 2 + 2 × n lineage rows (message + adapter each). */
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
const EXECUTIONS = 1000;
const FAN_OUT = 50_000;

describe.skipIf(missing !== undefined)(
  "the console at scale: 1,000 executions and 100,000 lineage rows",
  () => {
    let server: ServerProcess;
    let b: TestBrowser;
    let bigId = "";

    async function run(input: unknown): Promise<string> {
      for (;;) {
        const created = await server.call("POST", "/executions", { config: "wide", input });
        if (created.status === 201) return created.body.id;
        if (created.status !== 429)
          throw new Error(`start answered ${created.status}: ${JSON.stringify(created.body)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }

    async function settled(id: string): Promise<void> {
      for (;;) {
        const { body } = await server.call("GET", `/executions/${id}`);
        if (body.status !== "running") return;
        await new Promise((r) => setTimeout(r, 250));
      }
    }

    beforeAll(async () => {
      server = await startServerProcess({ env: { FACTFLOW_MAX_CONCURRENT: "50" } });
      expect((await server.call("POST", "/configs/wide/versions", { source: WIDE })).status).toBe(201);
      bigId = await run({ items: Array.from({ length: FAN_OUT }, (_, i) => i) });
      let last = "";
      for (let i = 1; i < EXECUTIONS; i++) last = await run({ items: [i] });
      await settled(bigId);
      await settled(last);
      b = await openBrowser();
    }, 600_000);
    afterAll(async () => {
      await b?.close();
      await server?.stop();
    });

    it("pages the executions list: one page of rows, the right total, the last page reachable", async () => {
      const { page } = b;
      const requests: string[] = [];
      page.on("request", (r) => {
        if (new URL(r.url()).pathname === "/api/v1/executions") requests.push(r.url());
      });
      await page.goto(`${server.base}/ui/#/executions?config=wide`);
      await expect.poll(() => page.getByTestId("pager").textContent()).toContain(`${EXECUTIONS} in all`);
      expect(await page.locator("[data-testid=executions-table] tbody tr").count()).toBe(25);
      expect(requests.every((url) => new URL(url).searchParams.get("limit") === "25")).toBe(true);
      await page.goto(`${server.base}/ui/#/executions?config=wide&offset=${EXECUTIONS - 25}`);
      await expect
        .poll(() => page.getByTestId("pager").textContent())
        .toContain(`page ${EXECUTIONS / 25} of ${EXECUTIONS / 25}`);
      expect(await page.locator("[data-testid=executions-table] tbody tr").count()).toBe(25);
      await b.shot("08-executions-1000");
    });

    it("scrolls 100,000 lineage rows fetching only the pages in view", async () => {
      const { page } = b;
      const pages: number[] = [];
      page.on("request", (r) => {
        const url = new URL(r.url());
        if (url.pathname === `/api/v1/executions/${bigId}/lineage`)
          pages.push(Number(url.searchParams.get("offset")));
      });
      await page.goto(`${server.base}/ui/#/executions/${bigId}/lineage`);
      const table = page.getByTestId("lineage-rows");
      await expect
        .poll(() => table.getAttribute("data-rows"), { timeout: 60_000 })
        .toBe(String(2 + 2 * FAN_OUT));
      await page.locator(".vtable-row >> text=completed").first().waitFor();
      expect(await page.locator(".vtable-row").count()).toBeLessThan(80);
      // Jump to the middle: the rows there load, and only their page is fetched.
      await page.locator(".vtable-body").evaluate((el) => {
        el.scrollTop = el.scrollHeight / 2;
      });
      await page.locator('.vtable-row[data-index="50001"] >> text=completed').waitFor();
      expect(await page.locator(".vtable-row").count()).toBeLessThan(80);
      expect(new Set(pages).size).toBeLessThanOrEqual(4);
      expect(pages).toContain(50_000);
      await b.shot("09-lineage-100k");
    });

    it("asks before fetching a tree in so large an execution, then draws a leaf's branch", async () => {
      const { page } = b;
      const leaf = (
        await server.call("GET", `/executions/${bigId}/lineage?route=sink&kind=message&offset=777&limit=1`)
      ).body.items[0].message_id as string;
      await page.goto(`${server.base}/ui/#/executions/${bigId}/lineage/${leaf}`);
      await page.getByTestId("large-tree").waitFor();
      await page.getByTestId("load-tree").click();
      // The leaf and the message it fanned out from: two messages, each a message row and an adapter row.
      await expect
        .poll(() => page.getByTestId("lineage-summary").getAttribute("data-rows"), { timeout: 120_000 })
        .toBe("4");
      expect(await page.locator('[data-testid="lineage-graph"] g.node').count()).toBe(2);
      expect(await page.locator('[data-testid="lineage-graph"] g.edge').count()).toBe(1);
    });

    it("shows the route counts of the 100,000-row execution", async () => {
      const { page } = b;
      await page.goto(`${server.base}/ui/#/executions/${bigId}`);
      const sink = page.locator('tr[data-route="sink"] [data-col="completed"]');
      await expect.poll(() => sink.textContent()).toBe(String(FAN_OUT));
      expect(b.problems).toEqual([]);
    });
  },
);
