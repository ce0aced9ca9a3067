import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { type Availability, probeTcp } from "@factflow/infra-testkit";
import { describe, it } from "vitest";
import { DEFAULT_ARTEMIS_URL } from "../src/index.js";

/** Where `scripts/services/artemis.sh` records the URL its broker answers on. */
function recordedUrl(): string | undefined {
  const base = process.env.FACTFLOW_SERVICES_DIR ?? join(homedir(), ".cache", "factflow", "services");
  const file = join(base, "artemis", "stomp.url");
  return existsSync(file) ? readFileSync(file, "utf8").trim() || undefined : undefined;
}

/** Broker URL of the integration tests: `ARTEMIS_STOMP_URL`, else what the service script printed. */
export const ARTEMIS_URL = process.env.ARTEMIS_STOMP_URL ?? recordedUrl() ?? DEFAULT_ARTEMIS_URL;

const parsed = new URL(ARTEMIS_URL);
export const ARTEMIS_HOST = parsed.hostname;
export const ARTEMIS_PORT = Number(parsed.port || 61613);

/** `ARTEMIS_URL` with host and port swapped for `override` (the fault proxy). */
export function urlVia(override?: { host: string; port: number }): string {
  if (override === undefined) return ARTEMIS_URL;
  const url = new URL(ARTEMIS_URL);
  url.hostname = override.host;
  url.port = String(override.port);
  return url.toString();
}

/** Probes the broker; the reason says how to start it. */
export async function artemisAvailability(): Promise<Availability> {
  const probe = await probeTcp(ARTEMIS_HOST, ARTEMIS_PORT, 2_000);
  if (probe.ok) return probe;
  return {
    ok: false,
    reason: `${probe.reason} (start it with: bash scripts/services/artemis.sh start, or set ARTEMIS_STOMP_URL)`,
  };
}

/** A run-unique name prefix, so runs against a shared broker never see each other. */
export function runPrefix(label: string): string {
  return `fftest-${label}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;
}

/**
 * Registers a file's tests against the real broker (`register`) when Artemis answers. When it does
 * not, it warns that `what` did not run and registers one test under `title` that is skipped with
 * the reason, or fails with it when FACTFLOW_REQUIRE_SERVICES=1.
 */
export async function registerWithArtemis(what: string, title: string, register: () => void): Promise<void> {
  const available = await artemisAvailability();
  if (available.ok) {
    register();
    return;
  }
  const { reason } = available;
  console.warn(`[factflow/artemis] ${what} not run: ${reason}`);
  describe(title, () => {
    it("needs a running Artemis", (context) => {
      if (process.env.FACTFLOW_REQUIRE_SERVICES === "1") {
        throw new Error(`Artemis is required (FACTFLOW_REQUIRE_SERVICES=1) but ${reason}`);
      }
      context.skip(`not run: ${reason}`);
    });
  });
}
