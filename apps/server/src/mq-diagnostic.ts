import { randomUUID } from "node:crypto";
import { scopedDestination } from "@factflow/engine";
import { backoffDelayMs, MessageStatus, type PipelineConfig, type QueueProtocol } from "@factflow/protocols";

/** The outcome of one route's round trip. */
export interface DiagnosticResult {
  readonly config: string;
  readonly route: string;
  readonly queue: string;
  readonly destination: string;
  readonly ok: boolean;
  readonly ms: number;
  readonly error?: string;
}

/**
 * Publishes one probe to a scratch copy of every route's inbound queue and waits for it to come
 * back through a subscription. Scratch destinations are laid out like an execution's queues, under
 * the scope `factflow-diagnostic-<id>` (never an execution id), so no execution's queue is touched,
 * and each is deleted again after its round trip so repeated diagnostics leave nothing behind on
 * the broker.
 */
export async function runMqDiagnostic(
  provider: QueueProtocol,
  configs: readonly PipelineConfig[],
  options: { timeoutMs?: number } = {},
): Promise<DiagnosticResult[]> {
  const timeoutMs = options.timeoutMs ?? 5000;
  const scope = `factflow-diagnostic-${randomUUID().slice(0, 8)}`;
  const results: DiagnosticResult[] = [];
  for (const config of configs) {
    for (const [route, spec] of Object.entries(config.routes)) {
      const destination = scopedDestination(scope, spec.inbound.queue);
      const started = performance.now();
      const base = { config: config.name, route, queue: spec.inbound.queue, destination };
      try {
        await roundTrip(provider, destination, `diagnostic:${scope}`, timeoutMs);
        results.push({ ...base, ok: true, ms: Math.round(performance.now() - started) });
      } catch (error) {
        results.push({
          ...base,
          ok: false,
          ms: Math.round(performance.now() - started),
          error: (error as Error).message,
        });
      }
    }
  }
  return results;
}

async function roundTrip(
  provider: QueueProtocol,
  destination: string,
  subscription: string,
  timeoutMs: number,
) {
  const probe = randomUUID();
  let received!: () => void;
  const arrived = new Promise<void>((resolve) => {
    received = resolve;
  });
  const sub = await provider.subscribe(
    destination,
    (delivery) => {
      if ((delivery.message.body as { probe?: string } | null)?.probe === probe) received();
      return MessageStatus.ACKNOWLEDGED;
    },
    { subscription, prefetch: 1, concurrency: 1, retry: { maxAttempts: 1 } },
  );
  let timer: NodeJS.Timeout | undefined;
  try {
    await provider.publish(destination, { body: { probe } });
    await Promise.race([
      arrived,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`published but not consumed within ${timeoutMs} ms`)),
          timeoutMs,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
    await sub.unsubscribe();
    await deleteScratch(provider, destination);
  }
}

/** Pauses between attempts to delete a scratch queue: 100, 200, 400, 800 ms. */
const SCRATCH_DELETE_BACKOFF = { initialDelayMs: 100, maxDelayMs: 800 } as const;

/**
 * Best effort: a scratch queue that cannot be deleted (broker gone, consumer not yet detached)
 * must not turn a passed round trip into a failure. A late probe left in it is dropped with it.
 */
async function deleteScratch(provider: QueueProtocol, destination: string): Promise<void> {
  for (let attempt = 1; attempt <= 5; attempt++) {
    try {
      const result = await provider.admin.deleteDestination({ destination }, { keepDeadLetters: false });
      // Some brokers detach a stopped consumer asynchronously: only that refusal is worth a retry.
      if (result.deleted || !/consumer/i.test(result.reason ?? "")) return;
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, backoffDelayMs(SCRATCH_DELETE_BACKOFF, attempt)));
  }
}

/** One human-readable line per route. */
export function diagnosticLine(result: DiagnosticResult): string {
  const status = result.ok ? "ok  " : "FAIL";
  const detail = result.ok ? `publish+consume in ${result.ms} ms` : result.error;
  return `${status} ${result.config}/${result.route} ${result.destination}: ${detail}`;
}
