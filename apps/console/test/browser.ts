import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import axeCore from "axe-core";
import { type BrowserContext, chromium, type Page } from "playwright-core";

/** Debian's Chromium (`apt-get install chromium`); browser downloads fail on these machines. */
export const CHROMIUM = process.env.FACTFLOW_CHROMIUM ?? "/usr/bin/chromium";
/** Screenshots of each page, kept as test artefacts (gitignored). */
export const SHOTS_DIR = resolve(import.meta.dirname, "../test-results/screenshots");

/** Why the browser tests cannot run here, or undefined when they can. */
export function chromiumMissing(): string | undefined {
  return existsSync(CHROMIUM)
    ? undefined
    : `no Chromium at ${CHROMIUM}: install it with \`apt-get install -y chromium\` (or set FACTFLOW_CHROMIUM)`;
}

export interface TestBrowser {
  context: BrowserContext;
  page: Page;
  /** Problems the page reported: console errors, CSP violations, uncaught exceptions. */
  problems: string[];
  shot(name: string): Promise<void>;
  close(): Promise<void>;
}

/** A headless Chromium with a fresh profile (`--user-data-dir`, given as Playwright wants it) and one page. */
export async function openBrowser(): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), "factflow-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport: { width: 1360, height: 900 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(60_000);
  const problems: string[] = [];
  page.on("console", (message) => {
    // Failed loads are recorded with their URL below; 401 and 409 are answers the page handles.
    if (message.type() === "error" && !/Failed to load resource/.test(message.text()))
      problems.push(message.text());
  });
  page.on("pageerror", (error) => problems.push(error.message));
  page.on("response", (response) => {
    if (response.status() >= 400 && ![401, 409].includes(response.status()))
      problems.push(
        `${response.status()} ${response.request().method()} ${new URL(response.url()).pathname}`,
      );
  });
  mkdirSync(SHOTS_DIR, { recursive: true });
  return {
    context,
    page,
    problems,
    async shot(name) {
      await page.screenshot({ path: join(SHOTS_DIR, `${name}.png`), fullPage: true });
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** axe-core's whole script, as axe-core hands it out for injection into a page. */
const AXE_SOURCE: string = axeCore.source;

/** One axe-core finding, reduced to what a failing assertion should print. */
export interface AxeFinding {
  id: string;
  impact: string | null;
  help: string;
  targets: string[];
}

/**
 * Runs axe-core inside the page (injected through the DevTools protocol, so the page's CSP, which
 * forbids inline scripts, stays as served) and returns its serious and critical violations.
 */
export async function seriousViolations(page: Page): Promise<AxeFinding[]> {
  if (!(await page.evaluate(() => "axe" in window))) await page.evaluate(AXE_SOURCE);
  const findings = await page.evaluate(async () => {
    // biome-ignore lint/suspicious/noExplicitAny: axe-core is injected as a global, untyped here.
    const axe = (window as any).axe;
    const result = await axe.run(document, { resultTypes: ["violations"] });
    // biome-ignore lint/suspicious/noExplicitAny: axe-core's result shape.
    return result.violations.map((v: any) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      // biome-ignore lint/suspicious/noExplicitAny: axe-core's result shape.
      targets: v.nodes.slice(0, 5).map((n: any) => String(n.target)),
    }));
  });
  return (findings as AxeFinding[]).filter((f) => f.impact === "serious" || f.impact === "critical");
}
