import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumMissing, openBrowser, seriousViolations, type TestBrowser } from "./browser.ts";
import { type ServerProcess, startServerProcess } from "./server-process.ts";

const TOKEN = "console-test-token-0123456789";
const missing = chromiumMissing();
if (missing !== undefined) {
  if (process.env.FACTFLOW_REQUIRE_SERVICES === "1")
    throw new Error(`[console] browser tests need Chromium: ${missing}`);
  console.warn(`[console] skipping the browser tests: ${missing}`);
}

interface LineageRow {
  id: string;
  kind: string;
  message_id: string;
  parent_id: string | null;
  route: string;
}

describe.skipIf(missing !== undefined)(
  "the web console in Chromium, against `factflow serve` with a token",
  () => {
    let server: ServerProcess;
    let b: TestBrowser;
    let executionId = "";

    beforeAll(async () => {
      server = await startServerProcess({ token: TOKEN });
      b = await openBrowser();
    });
    afterAll(async () => {
      await b?.close();
      await server?.stop();
    });

    it("asks for the token, refuses a wrong one, keeps the right one in session storage only", async () => {
      const { page } = b;
      await page.goto(`${server.base}/ui/`);
      await page.getByTestId("login-form").waitFor();
      expect(await page.title()).toBe("Sign in · Factflow");
      expect(await seriousViolations(page)).toEqual([]);
      await b.shot("01-login");
      await page.getByTestId("token-input").fill("not-the-token-at-all");
      await page.getByTestId("login-button").click();
      await expect.poll(() => page.getByTestId("error").textContent()).toContain("refused");
      await page.getByTestId("token-input").fill(TOKEN);
      await page.getByTestId("login-button").click();
      await page.getByTestId("executions-table").waitFor();
      expect(await page.evaluate(() => sessionStorage.getItem("factflow.token"))).toBe(TOKEN);
      expect(page.url()).not.toContain(TOKEN);
      // The server itself still refuses a change without the token.
      const refused = await fetch(`${server.base}/api/v1/executions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ config: "docs-ingest" }),
      });
      expect(refused.status).toBe(401);
    });

    it("shows a new execution in the list live, without a reload, until it completes", async () => {
      const { page } = b;
      await page.goto(`${server.base}/ui/#/executions`);
      await page.getByTestId("executions-table").waitFor();
      const created = await server.call("POST", "/executions", { config: "docs-ingest", input: {} });
      expect(created.status).toBe(201);
      executionId = created.body.id;
      const row = page.locator(`tr[data-execution-id="${executionId}"]`);
      await row.waitFor({ timeout: 60_000 });
      await expect.poll(() => row.getAttribute("data-status"), { timeout: 120_000 }).toBe("completed");
      await b.shot("02-executions");
      // The same page starts one from the form: it opens the new execution.
      await page.getByTestId("start-input").fill("{}");
      await page.getByTestId("start-button").click();
      await page.getByTestId("execution-page").waitFor();
      expect(page.url()).toMatch(/#\/executions\/[0-9a-f-]{36}$/);
    });

    it("shows per-route counts equal to the API's and draws the pipeline graph", async () => {
      const { page } = b;
      await page.goto(`${server.base}/ui/#/executions/${executionId}`);
      await page.getByTestId("execution-page").waitFor();
      await expect
        .poll(() => page.getByTestId("execution-page").getAttribute("data-status"))
        .toBe("completed");
      const api = (await server.call("GET", `/executions/${executionId}`)).body;
      for (const [route, counts] of Object.entries(
        api.routes as Record<string, { messages: Record<string, number> }>,
      )) {
        const cells = page.locator(`tr[data-route="${route}"]`);
        expect(await cells.locator('[data-col="completed"]').textContent()).toBe(
          String(counts.messages.completed ?? 0),
        );
        expect(await cells.locator('[data-col="failed"]').textContent()).toBe(
          String(counts.messages.failed ?? 0),
        );
        const total = Object.values(counts.messages).reduce((a, c) => a + c, 0);
        expect(await cells.locator('[data-col="messages"]').textContent()).toBe(String(total));
      }
      // Five routes and the five queues between them.
      expect(await page.locator('[data-testid="pipeline-graph"] g.node.route').count()).toBe(5);
      expect(await page.locator('[data-testid="pipeline-graph"] g.node.queue').count()).toBe(5);
      expect(await page.getByTestId("completion-moment").textContent()).toContain("after");
      await b.shot("03-execution");
    });

    it("draws the known lineage tree of one message", async () => {
      const { page } = b;
      // A file message from `split`: its parent is the discover message, its children are sections.
      const files = (
        await server.call("GET", `/executions/${executionId}/lineage?route=split&kind=message&limit=1`)
      ).body;
      const messageId: string = files.items[0].message_id;
      const tree = (await server.call("GET", `/executions/${executionId}/lineage/${messageId}`)).body
        .items as LineageRow[];
      const messages = new Set(tree.filter((r) => r.kind === "message").map((r) => r.message_id));
      // A child names the adapter row that emitted it; that row belongs to the parent message.
      const emitter = new Map(tree.filter((r) => r.kind === "adapter").map((r) => [r.id, r.message_id]));
      const edges = new Set(
        tree
          .filter((r) => r.kind === "message" && r.parent_id !== null)
          .map((r) => `${emitter.get(r.parent_id as string) ?? r.parent_id}>${r.message_id}`),
      );
      expect(messages.size).toBeGreaterThan(2);
      // The file's message has a parent (discover) and section children (enrich).
      expect([...edges].filter((e) => e.endsWith(`>${messageId}`))).toHaveLength(1);
      expect([...edges].filter((e) => e.startsWith(`${messageId}>`)).length).toBeGreaterThan(0);

      await page.goto(`${server.base}/ui/#/executions/${executionId}/lineage/${messageId}`);
      const summary = page.getByTestId("lineage-summary");
      await expect.poll(() => summary.getAttribute("data-rows")).toBe(String(tree.length));
      expect(await summary.getAttribute("data-messages")).toBe(String(messages.size));
      const drawn = await page
        .locator('[data-testid="lineage-graph"] g.node')
        .evaluateAll((nodes) => nodes.map((n) => n.getAttribute("data-node-id")));
      expect(new Set(drawn)).toEqual(messages);
      expect(await page.locator('[data-testid="lineage-graph"] g.edge').count()).toBe(edges.size);
      expect(
        await page.locator('[data-testid="lineage-graph"] g.node.focus').getAttribute("data-node-id"),
      ).toBe(messageId);
      await b.shot("04-lineage");

      // A batch message, three hops below the init message: its tree reaches the root.
      const first = async (route: string) =>
        (await server.call("GET", `/executions/${executionId}/lineage?route=${route}&kind=message&limit=1`))
          .body.items[0].message_id as string;
      const root = await first("discover");
      const batch = await first("batch");
      await page.goto(`${server.base}/ui/#/executions/${executionId}/lineage/${batch}`);
      await page.locator(`[data-testid="lineage-graph"] g.node[data-node-id="${batch}"]`).waitFor();
      expect(await page.locator(`[data-testid="lineage-graph"] g.node[data-node-id="${root}"]`).count()).toBe(
        1,
      );
      const labels = await page.locator('[data-testid="lineage-graph"] .node-label').allTextContents();
      for (const route of ["discover", "split", "enrich", "batch"])
        expect(
          labels.some((l) => l.startsWith(`${route} ·`)),
          route,
        ).toBe(true);

      // The execution's whole lineage, virtualised: far fewer rows in the DOM than in the table.
      await page.goto(`${server.base}/ui/#/executions/${executionId}/lineage`);
      const table = page.getByTestId("lineage-rows");
      const total = (await server.call("GET", `/executions/${executionId}/lineage?limit=1`)).body.total;
      await expect.poll(() => table.getAttribute("data-rows")).toBe(String(total));
      await page.locator(".vtable-row >> text=completed").first().waitFor();
      expect(await page.locator(".vtable-row").count()).toBeLessThan(Math.min(total, 80));
    });

    it("shows the redrive guard's refusal, then redrives one dead letter and the count drops", async () => {
      const { page } = b;
      const destination = `/queue/${executionId}/docs.sections`;
      const before = (
        await server.call("GET", `/queues/dlq?destination=${encodeURIComponent(destination)}&limit=1`)
      ).body.total;
      expect(before).toBeGreaterThan(0);
      await page.goto(`${server.base}/ui/#/dead-letters?destination=${encodeURIComponent(destination)}`);
      const total = page.getByTestId("dlq-total");
      await expect.poll(() => total.getAttribute("data-total")).toBe(String(before));
      await b.shot("05-dead-letters");

      await page.getByTestId("redrive-one").first().click();
      await page.getByTestId("confirm").waitFor();
      expect(await page.getByTestId("confirm").textContent()).toContain(`${before} → ${before - 1}`);
      await page.getByTestId("confirm-yes").click();
      // The execution is over: the server's guard refuses (409) and the page says so.
      await page.getByTestId("redrive-refused").waitFor();
      expect(await page.getByTestId("redrive-refused").textContent()).toContain("execution_not_running");
      await b.shot("06-redrive-refused");
      await page.getByTestId("redrive-force").click();
      await page.getByTestId("confirm-yes").click();
      await expect.poll(() => total.getAttribute("data-total")).toBe(String(before - 1));
      const after = (
        await server.call("GET", `/queues/dlq?destination=${encodeURIComponent(destination)}&limit=1`)
      ).body.total;
      expect(after).toBe(before - 1);

      // Discard asks first and names the exact count.
      await page.getByTestId("discard").first().click();
      expect(await page.getByTestId("confirm").textContent()).toContain(`1 of ${before - 1}`);
      await page.getByTestId("confirm-yes").click();
      await expect.poll(() => total.getAttribute("data-total")).toBe(String(before - 2));
    });

    it("shows queues, durability counters, readiness and the mq-diagnostic lines", async () => {
      const { page } = b;
      await page.goto(`${server.base}/ui/#/system`);
      await expect.poll(() => page.getByTestId("readyz").getAttribute("data-status")).toBe("ready");
      await page.locator('[data-counter="durability.lost"]').waitFor();
      expect(await page.locator('[data-counter="durability.lost"] td.num').textContent()).toBe("0");
      await page.getByTestId("run-diagnostic").click();
      const diagnostic = page.getByTestId("diagnostic");
      await diagnostic.waitFor({ timeout: 90_000 });
      expect(await diagnostic.getAttribute("data-ok")).toBe("true");
      expect(await diagnostic.textContent()).toContain("docs-ingest/discover");
      await b.shot("07-system");
      expect(b.problems).toEqual([]);
    });
  },
);

describe.skipIf(missing !== undefined)(
  "the console when reads need the token too (FACTFLOW_API_TOKEN_READS=1)",
  () => {
    let server: ServerProcess;
    let b: TestBrowser;

    beforeAll(async () => {
      server = await startServerProcess({ token: TOKEN, env: { FACTFLOW_API_TOKEN_READS: "1" } });
      b = await openBrowser();
    });
    afterAll(async () => {
      await b?.close();
      await server?.stop();
    });

    it("signs in, then lists, starts and follows an execution with the token as a header only", async () => {
      const { page } = b;
      const urls: string[] = [];
      page.on("request", (r) => urls.push(r.url()));
      await page.goto(`${server.base}/ui/`);
      await expect.poll(() => page.locator("main").textContent()).toContain("for every request");
      await page.getByTestId("token-input").fill(TOKEN);
      await page.getByTestId("login-button").click();
      await page.getByTestId("executions-table").waitFor();
      await page.getByTestId("start-button").click();
      await page.getByTestId("execution-page").waitFor();
      await expect
        .poll(() => page.getByTestId("execution-page").getAttribute("data-status"), { timeout: 120_000 })
        .toBe("completed");
      expect(urls.some((u) => u.endsWith("/events"))).toBe(true);
      expect(urls.filter((u) => u.includes(TOKEN))).toEqual([]);
      expect(b.problems).toEqual([]);
    });
  },
);
