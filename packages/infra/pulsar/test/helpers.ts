import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { type Availability, probeTcp } from "@factflow/infra-testkit";
import { type DeadLetterSource, Headers } from "@factflow/protocols";
import { decodePayload } from "../src/codec.js";
import { DEAD_LETTER_SUBSCRIPTION, parsePulsarConfig, routeOf, WsTransport } from "../src/index.js";
import { Producers } from "../src/producers.js";
import { PulsarRest } from "../src/rest.js";

/** Where `scripts/services/pulsar.sh` records the URL its broker's WebSocket API answers on. */
function recordedUrl(): string | undefined {
  const base = process.env.FACTFLOW_SERVICES_DIR ?? join(homedir(), ".cache", "factflow", "services");
  const file = join(base, "pulsar", "ws.url");
  return existsSync(file) ? readFileSync(file, "utf8").trim() || undefined : undefined;
}

/** WebSocket URL of the integration tests: `PULSAR_URL`, else what the service script recorded. */
export const PULSAR_URL = process.env.PULSAR_URL ?? recordedUrl() ?? "ws://127.0.0.1:8080";

const parsed = new URL(PULSAR_URL);
export const PULSAR_HOST = parsed.hostname;
export const PULSAR_PORT = Number(parsed.port || 8080);

/** `PULSAR_URL` with host and port swapped for `override` (the fault proxy); admin calls follow it. */
export function urlVia(override?: { host: string; port: number }): string {
  if (override === undefined) return PULSAR_URL;
  const url = new URL(PULSAR_URL);
  url.hostname = override.host;
  url.port = String(override.port);
  return url.toString().replace(/\/$/, "");
}

/** Probes the broker; the reason says how to start it. */
export async function pulsarAvailability(): Promise<Availability> {
  const probe = await probeTcp(PULSAR_HOST, PULSAR_PORT, 2_000);
  if (probe.ok) return probe;
  return {
    ok: false,
    reason: `${probe.reason} (start it with: bash scripts/services/pulsar.sh start, or set PULSAR_URL)`,
  };
}

/**
 * Stores one more copy of the dead letter `messageId` of `source`, as the broker holds it after the
 * answer to the dead-letter copy's send was lost: the same payload, sent to the dead-letter topic again.
 */
export async function storeDeadLetterAgain(source: DeadLetterSource, messageId: string): Promise<void> {
  const config = parsePulsarConfig({ url: urlVia() });
  const route = routeOf(source.destination, source.subscription ?? "admin");
  const rest = new PulsarRest({
    adminUrl: config.adminUrl,
    tenant: config.tenant,
    namespace: config.namespace,
    timeoutMs: config.publishTimeoutMs,
  });
  const transport = new WsTransport({
    url: config.url,
    tenant: config.tenant,
    namespace: config.namespace,
    connectTimeoutMs: config.connectTimeoutMs,
    pingIntervalMs: config.pingIntervalMs,
  });
  const producers = new Producers(transport, config.publishTimeoutMs);
  try {
    for (let position = 1; ; position++) {
      const peeked = await rest.peek(route.deadLetterTopic, DEAD_LETTER_SUBSCRIPTION, position);
      if (peeked === undefined) throw new Error(`no dead letter ${messageId} in ${route.deadLetterTopic}`);
      const decoded = decodePayload(peeked.payload);
      if ("error" in decoded || decoded.headers[Headers.messageId] !== messageId) continue;
      await producers.send(route.deadLetterTopic, { payload: peeked.payload.toString("base64") });
      return;
    }
  } finally {
    producers.closeAll();
    transport.closeAll();
  }
}
