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

    it("cuts the root's tree at 5,000 rows, loads up to 20,000 on request, then says where the rest are", async () => {
      const { page } = b;
      const root = (await server.call("GET", `/executions/${bigId}/lineage?route=fan&kind=message&limit=1`))
        .body.items[0].message_id as string;
      const limits: (string | null)[] = [];
      page.on("request", (r) => {
        const url = new URL(r.url());
        if (url.pathname === `/api/v1/executions/${bigId}/lineage/${root}`)
          limits.push(url.searchParams.get("limit"));
      });
      // From another page: the question before a large tree is asked once per visit to an execution's trees.
      await page.goto(`${server.base}/ui/#/executions/${bigId}`);
      // Both are changes of the hash alone: unless the execution page has rendered in between, the
      // tree page never unmounts, and it keeps the answer to the question from the tree before.
      await page.getByTestId("execution-page").waitFor();
      await page.goto(`${server.base}/ui/#/executions/${bigId}/lineage/${root}`);
      await page.getByTestId("load-tree").click();
      const summary = page.getByTestId("lineage-summary");
      await expect.poll(() => summary.getAttribute("data-rows"), { timeout: 120_000 }).toBe("5000");
      expect(await summary.getAttribute("data-truncated")).toBe("true");
      const notice = page.getByTestId("tree-truncated");
      expect(await notice.getAttribute("data-limit")).toBe("5000");
      expect(await notice.textContent()).toContain("Showing the first 5000 rows of this tree");
      expect(await page.getByTestId("tree-max").count()).toBe(0);

      await page.getByTestId("tree-more").click();
      expect(page.url()).toMatch(/\?limit=20000$/);
      await expect.poll(() => summary.getAttribute("data-rows"), { timeout: 120_000 }).toBe("20000");
      expect(limits).toEqual([null, "20000"]);
      expect(await summary.getAttribute("data-truncated")).toBe("true");
      expect(await notice.getAttribute("data-limit")).toBe("20000");
      // At the maximum there is nothing more to ask for: the notice says where the rest are instead.
      expect(await page.getByTestId("tree-more").count()).toBe(0);
      expect(await page.getByTestId("tree-max").textContent()).toContain("20,000 is the most one tree holds");
      expect(await page.getByTestId("tree-cli").textContent()).toBe(
        `factflow lineage ${bigId} --message ${root} --limit 20000`,
      );
      // The table holds every row of the answer, virtualised.
      expect(await page.getByTestId("lineage-tree-rows").getAttribute("data-rows")).toBe("20000");
      expect(await page.locator("[data-testid=lineage-tree-rows] .vtable-row").count()).toBeLessThan(80);
      await b.shot("17-lineage-tree-limit");

      // The limit is in the URL: a reload asks for it again, without the large-execution question.
      await page.reload();
      await expect.poll(() => summary.getAttribute("data-rows"), { timeout: 120_000 }).toBe("20000");
      expect(limits).toEqual([null, "20000", "20000"]);
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
