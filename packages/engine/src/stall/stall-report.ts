import type { RouteStall, StallDiagnosis } from "./stall-diagnosis.js";

/** `3 messages`, `1 message`. */
function count(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

function sum(values: Readonly<Record<string, number>> | undefined): number {
  return values === undefined ? 0 : Object.values(values).reduce((a, b) => a + b, 0);
}

/** Sentences about one route: what it holds that has not finished. */
function routeSentences(r: RouteStall, publishing: boolean): string[] {
  const out: string[] = [];
  const name = `route "${r.route}"`;
  const b = r.broker;
  if (r.paused) {
    out.push(
      `${name} is paused (concurrency 0)${b !== undefined && b.depth > 0 ? `; ${count(b.depth, "message")} wait in queue "${r.queue}"` : ""}: give its queue a concurrency above 0`,
    );
  }
  const running = r.inFlight - r.waitingForSlot - r.publishing;
  if (running > 0) out.push(`${name}: ${count(running, "delivery", "deliveries")} running its adapters`);
  if (r.waitingForSlot > 0) {
    out.push(
      `${name}: ${count(r.waitingForSlot, "delivery", "deliveries")} waiting for a handler slot (settings.max_handlers, inbound.concurrency) or below the fan-out watermark (settings.max_fanout_pending)`,
    );
  }
  if (r.publishing > 0) {
    out.push(
      `${name}: ${count(r.publishing, "delivery", "deliveries")} waiting for ${count(r.outputsPending, "output")} to be registered in lineage and confirmed by the broker`,
    );
  }
  if (r.held > 0) {
    out.push(
      `${name}: ${count(r.held, "message")} held in a batch until it fills, its timer fires or nothing else is left to arrive`,
    );
  }
  if (b === undefined) return out;
  if (!r.paused && b.depth > 0 && r.inFlight === 0) {
    out.push(
      `${name}: ${count(b.depth, "message")} in queue "${r.queue}" not delivered (a retry waiting for its delay, or a consumer that receives nothing)`,
    );
  }
  const elsewhere = Math.max(0, b.inFlight - r.inFlight - r.held);
  if (elsewhere > 0) {
    out.push(
      `${name}: the broker handed out ${count(elsewhere, "message")} that no handler here holds (another process, or a settlement on its way)`,
    );
  }
  const unaccounted = sum(r.messages?.open) - r.inFlight - r.held - b.depth - elsewhere;
  if (unaccounted > 0) {
    const causes = [
      ...(publishing ? ["an output still being published to it"] : []),
      "a retry the broker does not count",
      "a lost message (the execution reconciles such rows after its reconcile period)",
    ];
    out.push(
      `${name}: ${count(unaccounted, "open message row")} with no message in its queue or in flight: ${causes.join(", or ")}`,
    );
  }
  return out;
}

/**
 * What the execution would need for it to move on, one sentence each, from the most specific
 * (a route's deliveries) to the most general (the provider's and lineage's backlogs).
 */
export function waitingFor(d: Omit<StallDiagnosis, "waitingFor">): string[] {
  const out: string[] = [];
  if (d.phase === "starting") {
    out.push(
      d.seedPending > 0
        ? `the ${d.provider.name} provider to confirm ${count(d.seedPending, "seed message")}`
        : "the execution to start: its routes are subscribing or its adapters are being created",
    );
  }
  const publishing = d.seedPending > 0 || d.routes.some((r) => r.outputsPending > 0);
  for (const route of d.routes) out.push(...routeSentences(route, publishing));
  const unconfirmed = d.provider.published - d.provider.confirmed;
  if (unconfirmed > 0 && (d.seedPending > 0 || d.routes.some((r) => r.publishing > 0))) {
    out.push(
      `the ${d.provider.name} provider to confirm publishes: ${d.provider.confirmed} of ${d.provider.published} confirmed since it connected (every execution of this process; a failed publish stays unconfirmed)`,
    );
  }
  if (d.lineage.queuedWrites > 0)
    out.push(`the lineage store to commit ${count(d.lineage.queuedWrites, "queued write")}`);
  if (out.length === 0) {
    out.push(
      d.problems.length > 0
        ? "nothing visible in what could be read (see the reads that failed)"
        : "nothing visible: no delivery in flight, no message queued, no open lineage row; the completion check should end the execution",
    );
  }
  return out;
}

function seconds(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

function routeLine(r: RouteStall): string {
  const parts = [
    `${r.inFlight} in flight (${r.waitingForSlot} waiting for a slot, ${r.publishing} publishing ${count(r.outputsPending, "output")})`,
    `${r.held} held`,
  ];
  if (r.paused) parts.push("paused");
  if (r.broker !== undefined)
    parts.push(
      `queue: ${r.broker.depth} waiting, ${r.broker.inFlight} handed out, ${r.broker.deadLetters} dead`,
    );
  if (r.messages !== undefined) {
    const open = Object.entries(r.messages.open)
      .map(([status, n]) => `${status} ${n}`)
      .join(", ");
    parts.push(
      `lineage: ${count(r.messages.total, "message")}, ${sum(r.messages.open)} open${open === "" ? "" : ` (${open})`}`,
    );
  }
  const c = r.counters;
  parts.push(`done ${c.acknowledged}, failed ${c.failed}, rejected ${c.rejected}, published ${c.published}`);
  return `  ${r.route} (queue ${r.queue}): ${parts.join("; ")}`;
}

/** The diagnosis as text for a terminal or a log: what it waits for, then each route's figures. */
export function formatStallDiagnosis(d: StallDiagnosis): string {
  // Progress is sampled about once a second: a quiet time below that says nothing.
  const quiet =
    d.quietMs < 1000
      ? "is waiting for:"
      : `has made no progress for ${seconds(d.quietMs)} (last at ${d.lastProgressAt}); waiting for:`;
  const lines = [
    `execution ${d.executionId} ${quiet}`,
    ...d.waitingFor.map((s) => `  - ${s}`),
    "routes:",
    ...d.routes.map(routeLine),
    `lineage: ${d.lineage.openRows === null ? "open rows unknown" : count(d.lineage.openRows, "open row")}, ${count(d.lineage.queuedWrites, "write")} queued; provider ${d.provider.name}: ${d.provider.confirmed} of ${d.provider.published} publishes confirmed`,
  ];
  if (d.problems.length > 0) lines.push(`could not read: ${d.problems.join("; ")}`);
  return lines.join("\n");
}
