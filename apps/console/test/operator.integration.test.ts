import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumMissing, openBrowser, seriousViolations, type TestBrowser } from "./browser.ts";
import { type ServerProcess, startServerProcess } from "./server-process.ts";

const missing = chromiumMissing();
if (missing !== undefined && process.env.FACTFLOW_REQUIRE_SERVICES === "1") {
  throw new Error(`[console] browser tests need Chromium: ${missing}`);
}

/** 200 items through one slow consumer: a few seconds of steady progress events to chart. */
const PACED = `
name: paced
init: { route: fan, message: { items: [1] } }
routes:
  fan:
    inbound: { queue: paced.fan }
    adapters:
      - type: split
        config: { field: items }
    outbound: [paced.items]
  sink:
    inbound: { queue: paced.items, concurrency: 1 }
    adapters:
      - type: delay
        config: { ms: 25 }
`;

/** One message whose adapter throws: storage refuses the key "runs/../out.json". */
const THROWING = `
name: throwing
settings:
  retry: { max_attempts: 1 }
init: { route: store, message: {} }
routes:
  store:
    inbound: { queue: throwing.store }
    adapters:
      - type: write_artefact
        config: { key: "runs/{body.name}/out.json" }
`;

interface Row {
  id: string;
  kind: string;
  message_id: string;
  correlation_id: string;
  payload: unknown;
  error: { class: string; message: string } | null;
}

describe.skipIf(missing !== undefined)("what an operator reaches for, in Chromium", () => {
  let server: ServerProcess;
  let b: TestBrowser;
  let done = "";

  async function finished(id: string): Promise<void> {
    const deadline = Date.now() + 120_000;
    while ((await server.call("GET", `/executions/${id}`)).body.status === "running") {
      if (Date.now() > deadline) throw new Error(`execution ${id} still running after 120 s`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  beforeAll(async () => {
    server = await startServerProcess();
    expect((await server.call("POST", "/configs/paced/versions", { source: PACED })).status).toBe(201);
    done = (await server.call("POST", "/executions", { config: "docs-ingest", input: {} })).body.id;
    await finished(done);
    b = await openBrowser();
    await b.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.base });
  });
  afterAll(async () => {
    await b?.close();
    await server?.stop();
  });

  it("finds an execution, a message and a correlation id from the box on every page", async () => {
    const { page } = b;
    const row = (await server.call("GET", `/executions/${done}/lineage?route=split&kind=message&limit=1`))
      .body.items[0] as Row;
    await page.goto(`${server.base}/ui/#/system`);
    await page.getByTestId("search-input").fill(row.message_id);
    await page.getByTestId("search-button").click();
    const hits = page.getByTestId("message-hits");
    await hits.waitFor();
    expect(
      await hits
        .locator("tr[data-execution-id]")
        .evaluateAll((r) => r.map((e) => e.getAttribute("data-execution-id"))),
    ).toEqual([done]);
    expect(await page.title()).toMatch(/^Find /);
    expect(await seriousViolations(page)).toEqual([]);
    await b.shot("11-search");
    await hits.getByTestId("hit-tree").click();
    await expect
      .poll(() => page.locator("[data-testid=lineage-graph] g.node.focus").getAttribute("data-node-id"))
      .toBe(row.message_id);

    // A correlation id is the id of the message that started the chain.
    await page.getByTestId("search-input").fill(row.correlation_id);
    await page.getByTestId("search-button").click();
    await expect.poll(() => page.locator("[data-testid=message-hits] tr[data-execution-id]").count()).toBe(1);

    // An execution id goes straight to the execution.
    await page.getByTestId("search-input").fill(done);
    await page.getByTestId("search-button").click();
    await page.getByTestId("execution-page").waitFor();
    expect(page.url()).toMatch(new RegExp(`#/executions/${done}$`));

    await page.getByTestId("search-input").fill("no-such-id");
    await page.getByTestId("search-button").click();
    await expect.poll(() => page.getByTestId("no-messages").textContent()).toBe("Nothing has this id.");
  });

  it("shows inputs, lineage payloads and errors, and dead letters' bodies and headers, with copy and a size cap", async () => {
    const { page } = b;
    // An input over the 64 KB the detail carries inline: loaded on demand, shown cut, copied whole.
    const pad = "x".repeat(70_000);
    const big = (await server.call("POST", "/executions", { config: "paced", input: { items: [1, 2], pad } }))
      .body.id as string;
    await finished(big);
    await page.goto(`${server.base}/ui/#/executions/${big}`);
    await page.getByTestId("load-input").click();
    const input = page.getByTestId("input-payload");
    await input.waitFor();
    expect(await input.getAttribute("data-cut")).toBe("true");
    expect(Number(await input.getAttribute("data-size"))).toBeGreaterThan(70_000);
    await page.getByTestId("show-all").click();
    expect(await input.getAttribute("data-cut")).toBe("false");
    await input.getByTestId("copy-payload").click();
    await expect.poll(() => input.locator(".copy-state").textContent()).toContain("copied");
    const copied = JSON.parse(await page.evaluate(() => navigator.clipboard.readText()));
    expect(copied).toEqual({ items: [1, 2], pad });

    // A lineage row: its body (message rows) and its error (a failed adapter attempt).
    const rows = (
      await server.call("GET", `/executions/${done}/lineage?route=enrich&status=failed&limit=500`)
    ).body.items as Row[];
    const failedAdapter = rows.find((r) => r.kind === "adapter" && r.error !== null);
    expect(failedAdapter).toBeDefined();
    await page.goto(`${server.base}/ui/#/executions/${done}/lineage?route=enrich&status=failed`);
    const detail = page.getByTestId("row-detail");
    await page.locator(".vtable-row [data-testid=row-details]").first().waitFor();
    // Only the rows in view exist: scroll the virtualised table to a row, then open it.
    const open = async (index: number) => {
      await page.locator(".vtable-body").evaluate((el, i) => {
        el.scrollTop = Math.max(0, i * 28 - 56);
      }, index);
      await page.locator(`.vtable-row[data-index="${index}"] [data-testid=row-details]`).click();
    };
    await open(rows.findIndex((r) => r.id === failedAdapter?.id));
    await detail.waitFor();
    expect(await detail.getByTestId("row-error").textContent()).toContain(
      failedAdapter?.error?.message as string,
    );
    const messageRow = rows.findIndex((r) => r.kind === "message");
    await open(messageRow);
    const body = detail.getByTestId("row-payload");
    await body.waitFor();
    expect(JSON.parse((await body.locator("pre").textContent()) ?? "")).toEqual(rows[messageRow]?.payload);
    expect(await seriousViolations(page)).toEqual([]);
    await b.shot("12-lineage-row");

    // A dead letter: body, headers, last error.
    const destination = `/queue/${done}/docs.sections`;
    const letter = (
      await server.call("GET", `/queues/dlq?destination=${encodeURIComponent(destination)}&limit=1`)
    ).body.items[0];
    await page.goto(`${server.base}/ui/#/dead-letters?destination=${encodeURIComponent(destination)}`);
    await page.locator(`tr[data-message-id="${letter.message_id}"] [data-testid=open-letter]`).click();
    const letterBody = page.getByTestId("letter-body");
    await letterBody.waitFor();
    expect(JSON.parse((await letterBody.locator("pre").textContent()) ?? "")).toEqual(letter.body);
    expect(JSON.parse((await page.getByTestId("letter-headers").locator("pre").textContent()) ?? "")).toEqual(
      letter.headers,
    );
    expect(await seriousViolations(page)).toEqual([]);
  });

  it("redrives and discards a selection of dead letters, then purges the queue they wait in", async () => {
    const { page } = b;
    const destination = `/queue/${done}/docs.sections`;
    const count = async () =>
      (await server.call("GET", `/queues/dlq?destination=${encodeURIComponent(destination)}&limit=1`)).body
        .total as number;
    const before = await count();
    expect(before).toBeGreaterThanOrEqual(4);
    await page.goto(`${server.base}/ui/#/dead-letters?destination=${encodeURIComponent(destination)}`);
    const boxes = page.getByTestId("select-letter");
    await boxes.first().waitFor();
    await boxes.nth(0).check();
    await boxes.nth(1).check();
    await page.getByTestId("redrive-selected").click();
    await expect.poll(() => page.getByTestId("confirm").textContent()).toContain(`${before} → ${before - 2}`);
    await page.getByTestId("confirm-yes").click();
    // The execution is over: refused, then forced.
    await page.getByTestId("redrive-refused").waitFor();
    expect(await page.getByTestId("replay-instead").textContent()).toContain("replay 2 messages");
    await page.getByTestId("redrive-force").click();
    await page.getByTestId("confirm-yes").click();
    await expect
      .poll(() => page.getByTestId("outcome").textContent())
      .toBe(`redrove 2 dead letters; dead letters: ${before} → ${before - 2}`);
    expect(await count()).toBe(before - 2);

    await page.getByTestId("select-page").check();
    const onPage = await boxes.count();
    await page.getByTestId("discard-selected").click();
    await expect
      .poll(() => page.getByTestId("confirm").textContent())
      .toContain(`${onPage} of ${before - 2}`);
    await page.getByTestId("confirm-yes").click();
    await expect
      .poll(() => page.getByTestId("outcome").textContent())
      .toContain(`dead letters: ${before - 2} → ${before - 2 - onPage}`);

    // The two redriven messages wait in the queue, which nothing consumes any more: purge it.
    const depth = async () =>
      (await server.call("GET", `/queues/stats?destination=${encodeURIComponent(destination)}`)).body
        .depth as number;
    expect(await depth()).toBe(2);
    await page.goto(`${server.base}/ui/#/system`);
    const queueRow = page.locator(`tr[data-destination="${destination}"]`);
    await expect.poll(() => queueRow.locator("[data-col=depth]").textContent()).toBe("2");
    await queueRow.getByTestId("purge").click();
    await expect
      .poll(() => page.getByTestId("confirm-purge").textContent())
      .toContain("2 → 0 waiting messages");
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByTestId("confirm-purge-yes").click();
    await expect
      .poll(() => page.getByTestId("purge-outcome").textContent())
      .toContain(`purged 2 messages from ${destination}`);
    expect(await depth()).toBe(0);
    // Purged in place: the queue is still there, and its dead letters are kept.
    expect(
      (await server.call("GET", "/queues")).body.items.map((d: { destination: string }) => d.destination),
    ).toContain(destination);
    expect(await count()).toBe(before - 2 - onPage);
  });

  it("refuses to purge the queue of a running execution until the operator says purge anyway", async () => {
    const { page } = b;
    const id = (
      await server.call("POST", "/executions", { config: "paced", input: { items: [...Array(800).keys()] } })
    ).body.id as string;
    const destination = `/queue/${id}/paced.items`;
    const depth = async () =>
      (await server.call("GET", `/queues/stats?destination=${encodeURIComponent(destination)}`)).body
        .depth as number;
    await page.goto(`${server.base}/ui/#/system`);
    const queueRow = page.locator(`tr[data-destination="${destination}"]`);
    await queueRow.getByTestId("purge").click();
    await expect.poll(() => page.getByTestId("confirm-purge").textContent()).toContain("waiting messages");
    await page.getByTestId("confirm-purge-yes").click();
    const refused = page.getByTestId("purge-refused");
    await expect.poll(() => refused.textContent()).toContain("is running");
    expect(await depth()).toBeGreaterThan(0);
    expect(await seriousViolations(page)).toEqual([]);
    await b.shot("16-purge-refused");
    await page.getByTestId("purge-force").click();
    await expect
      .poll(() => page.getByTestId("purge-outcome").textContent())
      .toMatch(/purged \d+ messages? from/);
    await server.call("POST", `/executions/${id}/cancel`);
    await finished(id);
  });

  it("charts queue depths and counter rates on the system page, and each route's rate from the event stream", async () => {
    const { page } = b;
    const paced = (
      await server.call("POST", "/executions", { config: "paced", input: { items: [...Array(800).keys()] } })
    ).body.id as string;
    await page.goto(`${server.base}/ui/#/system`);
    // Two reads (five seconds apart) make a rate; the paced execution's queues are there meanwhile.
    const published = page.locator('[data-counter="durability.published"] .rate-cell');
    await expect.poll(() => published.getAttribute("data-rate"), { timeout: 30_000 }).not.toBeNull();
    const spark = page.locator(
      `tr[data-destination="/queue/${paced}/paced.items"] [data-testid=queue-spark]`,
    );
    await expect
      .poll(async () => Number(await spark.getAttribute("data-points")), { timeout: 30_000 })
      .toBeGreaterThanOrEqual(2);
    await b.shot("07-system");

    await page.goto(`${server.base}/ui/#/executions/${paced}`);
    const rate = page.locator('tr[data-route="sink"] [data-testid=route-rate]');
    await expect
      .poll(async () => Number(await rate.getAttribute("data-rate")), { timeout: 60_000 })
      .toBeGreaterThan(0);
    expect(await rate.locator("svg.sparkline polyline").count()).toBe(2);
    await b.shot("13-route-rate");
    await finished(paced);
  });

  it("sorts executions by start, duration and status, limits them to a time range, and shows times with their zone", async () => {
    const { page } = b;
    // One more execution, cancelled, so the statuses differ.
    const cancelled = (
      await server.call("POST", "/executions", { config: "paced", input: { items: [...Array(400).keys()] } })
    ).body.id as string;
    await server.call("POST", `/executions/${cancelled}/cancel`);
    await finished(cancelled);
    const api = async (q: string) =>
      ((await server.call("GET", `/executions?limit=25${q}`)).body.items as { id: string }[]).map(
        (e) => e.id,
      );
    const ids = () =>
      page
        .locator("[data-testid=executions-table] tbody tr")
        .evaluateAll((r) => r.map((e) => e.getAttribute("data-execution-id")));
    await page.goto(`${server.base}/ui/#/executions`);
    await expect.poll(ids).toEqual(await api(""));
    await page.getByTestId("sort-started").click();
    await expect.poll(ids).toEqual(await api("&order=asc"));
    expect(page.url()).toContain("order=asc");
    // Links made before other sorts existed still read as oldest first.
    await page.goto(`${server.base}/ui/#/executions?order=oldest`);
    await expect.poll(ids).toEqual(await api("&order=asc"));

    await page.getByTestId("sort-duration").click();
    expect(page.url()).toContain("sort=duration");
    await expect.poll(ids).toEqual(await api("&sort=duration&order=desc"));
    expect(await page.locator("th[aria-sort=descending]").textContent()).toContain("longest first");
    await page.getByTestId("sort-duration").click();
    await expect.poll(ids).toEqual(await api("&sort=duration&order=asc"));
    await page.getByTestId("sort-status").click();
    await expect.poll(ids).toEqual(await api("&sort=status&order=asc"));
    expect(
      await page.locator("[data-testid=executions-table] tbody tr").first().getAttribute("data-status"),
    ).not.toBe("completed");
    expect(await seriousViolations(page)).toEqual([]);

    // A range in the URL is the API's range; the inputs show it in local time and change it.
    const all = (await server.call("GET", "/executions?order=asc&limit=25")).body.items as {
      id: string;
      created_at: string;
    }[];
    const second = all[1]?.created_at as string;
    const last = all.at(-1)?.created_at as string;
    await page.goto(
      `${server.base}/ui/#/executions?from=${encodeURIComponent(second)}&to=${encodeURIComponent(last)}`,
    );
    const ranged = await api(`&from=${encodeURIComponent(second)}&to=${encodeURIComponent(last)}`);
    expect(ranged.length).toBe(all.length - 2);
    await expect.poll(ids).toEqual(ranged);
    expect(await page.getByTestId("filter-from").inputValue()).toBe(
      await page.evaluate((iso) => {
        const d = new Date(iso);
        const pad = (n: number) => String(n).padStart(2, "0");
        return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
      }, second),
    );
    await page.getByTestId("clear-range").click();
    await expect.poll(ids).toEqual(await api(""));
    await page.getByTestId("filter-from").fill("2100-01-01T00:00");
    await expect
      .poll(() => page.url())
      .toContain(
        `from=${encodeURIComponent(await page.evaluate(() => new Date("2100-01-01T00:00").toISOString()))}`,
      );
    await expect.poll(ids).toEqual([]);
    await page.getByTestId("clear-range").click();

    const started = page.locator("[data-testid=executions-table] tbody tr time").first();
    await started.waitFor();
    expect(await started.getAttribute("datetime")).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(await started.textContent()).toMatch(/(UTC|GMT[+-]?\d*).*ago/);
  });

  it("shows the stack of an Error an adapter threw, whole, with copy", async () => {
    const { page } = b;
    // write_artefact hands its key to storage, which throws on a ".." segment: a real Error thrown
    // out of the adapter, whose stack lineage keeps.
    expect((await server.call("POST", "/configs/throwing/versions", { source: THROWING })).status).toBe(201);
    const id = (await server.call("POST", "/executions", { config: "throwing", input: { name: ".." } })).body
      .id as string;
    await finished(id);
    const rows = (await server.call("GET", `/executions/${id}/lineage?route=store&kind=adapter`)).body
      .items as (Row & { error: { class: string; message: string; stack?: string } | null })[];
    const thrown = rows.find((r) => r.error?.stack !== undefined);
    const stack = thrown?.error?.stack ?? "";
    expect(stack).toMatch(
      /^FactflowError: \[factflow\/storage\] artefact key "runs\/\.\.\/out\.json" is invalid/,
    );
    expect(stack).toMatch(/\n\s+at /);

    await page.goto(`${server.base}/ui/#/executions/${id}/lineage?route=store&kind=adapter`);
    await page.locator(".vtable-row [data-testid=row-details]").first().waitFor();
    const index = rows.indexOf(thrown as (typeof rows)[number]);
    await page.locator(`.vtable-row[data-index="${index}"] [data-testid=row-details]`).click();
    expect(await page.getByTestId("row-error").textContent()).toContain(
      `FactflowError: ${thrown?.error?.message}`,
    );
    const shown = page.getByTestId("row-stack");
    await shown.waitFor();
    expect(await shown.getAttribute("data-size")).toBe(String(Buffer.byteLength(stack)));
    expect(await shown.getAttribute("data-cut")).toBe("false");
    expect(await shown.locator("pre").textContent()).toBe(stack);
    await shown.getByTestId("copy-payload").click();
    await expect.poll(() => shown.locator(".copy-state").textContent()).toContain("copied");
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(stack);
    expect(await seriousViolations(page)).toEqual([]);
  });

  it("follows the system's dark preference and stays readable there", async () => {
    const { page } = b;
    await page.emulateMedia({ colorScheme: "dark" });
    for (const hash of ["#/executions", `#/executions/${done}`, "#/system"]) {
      await page.goto(`${server.base}/ui/${hash}`);
      await page.locator("h1").waitFor();
      await page.locator("[data-testid=loading]").waitFor({ state: "detached" });
      const background = await page.evaluate(
        () => getComputedStyle(document.documentElement).backgroundColor,
      );
      const [r = 255, g = 255, bl = 255] = (background.match(/\d+/g) ?? []).map(Number);
      expect(r + g + bl, background).toBeLessThan(150);
      expect(await seriousViolations(page), hash).toEqual([]);
    }
    await b.shot("14-dark");
    await page.emulateMedia({ colorScheme: "light" });
    expect(b.problems).toEqual([]);
  });
});
