import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { type Availability, probeTcp } from "@factflow/infra-testkit";
import { type DeadLetterSource, silentLogger } from "@factflow/protocols";
import type { IMessage } from "@stomp/stompjs";
import { describe, it } from "vitest";
import { parseArtemisConfig } from "../src/config.js";
import { DLQ_ID_HEADER, SEND_ID_HEADER, sendHeaders } from "../src/envelope-codec.js";
import { DEFAULT_ARTEMIS_URL, endpointOf } from "../src/index.js";
import { deadLetterQueueName, resolveDestination } from "../src/naming.js";
import { consumeQueue } from "../src/queue-consumer.js";
import { StompLink } from "../src/stomp-link.js";

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

/**
 * Stores one more copy of the dead letter `messageId` of `source`, as the broker holds it after the
 * RECEIPT of the dead-letter copy was lost: the same body and Factflow headers, sent again.
 */
export async function storeDeadLetterAgain(source: DeadLetterSource, messageId: string): Promise<void> {
  const config = parseArtemisConfig({ url: urlVia() });
  const link = new StompLink(endpointOf(config), config, silentLogger, "conformance");
  await link.connect();
  try {
    const dlq = deadLetterQueueName(resolveDestination(source.destination), source.subscription);
    let found: IMessage | undefined;
    const selector = `${DLQ_ID_HEADER} = '${messageId.replaceAll("'", "''")}'`;
    await consumeQueue(link, 10_000, dlq, selector, 1, async (message) => {
      found = message;
      return false;
    });
    if (found === undefined) throw new Error(`no dead letter ${messageId} in ${dlq}`);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(found.headers)) {
      if ((name.startsWith("x-") && name !== SEND_ID_HEADER) || name === DLQ_ID_HEADER) headers[name] = value;
    }
    await link.send(dlq, sendHeaders({ headers, delayMs: 0 }, "ANYCAST"), found.body, "a second copy");
  } finally {
    await link.close();
  }
}
