import type { DeadLetter, DeadLetterSource } from "@factflow/protocols";
import { FactflowError, parseDestination } from "@factflow/protocols";
import { Hono } from "hono";
import * as v from "valibot";
import { PagingQuery, readJson, readQuery } from "../http-input.js";
import { assertRedriveAllowed } from "../redrive-guard.js";
import type { FactflowRuntime } from "../runtime.js";

const destination = v.pipe(
  v.string(),
  v.check(
    (d) => !("error" in parseDestination(d)),
    "must be a destination such as /queue/<name> or /topic/<name>",
  ),
);
const SourceFields = { destination, subscription: v.optional(v.pipe(v.string(), v.minLength(1))) };
const SourceQuery = v.object(SourceFields);
const BrowseQuery = v.object({ ...SourceFields, ...PagingQuery });
const OneBody = v.strictObject({ ...SourceFields, message_id: v.pipe(v.string(), v.minLength(1)) });
/** Redrives refuse queues of executions that are over unless `force` is true (see redrive-guard). */
const force = v.optional(v.boolean(), false);
const RedriveBody = v.strictObject({ ...SourceFields, force });
const RedriveOneBody = v.strictObject({ ...SourceFields, message_id: OneBody.entries.message_id, force });
const DeleteBody = v.strictObject({
  ...SourceFields,
  if_empty: v.optional(v.boolean(), false),
  keep_dead_letters: v.optional(v.boolean(), true),
});

function sourceOf(input: { destination: string; subscription?: string | undefined }): DeadLetterSource {
  return input.subscription === undefined
    ? { destination: input.destination }
    : { destination: input.destination, subscription: input.subscription };
}

/** A dead letter as the API shows it. */
export function deadLetterJson(letter: DeadLetter) {
  return {
    message_id: letter.message.id,
    correlation_id: letter.message.correlationId,
    execution_id: letter.message.executionId ?? null,
    reason: letter.reason,
    attempts: letter.attempts,
    dead_lettered_at: letter.deadLetteredAt,
    last_error: letter.lastError ?? null,
    headers: letter.message.headers,
    body: letter.message.body,
    published_at: letter.message.publishedAt,
  };
}

/** Queue admin through `provider.admin`: list, stats, DLQ browse/redrive/discard, delete. */
export function queueRoutes(rt: FactflowRuntime): Hono {
  const app = new Hono();
  const admin = () => rt.provider.admin;

  app.get("/queues", async (c) => {
    const items = await admin().listDestinations();
    return c.json({ provider: rt.provider.name, items });
  });

  // Durability counters since connect: an operator compares published/confirmed/acked and checks
  // that `lost` (provider) and `lost` (lineage) stay 0.
  app.get("/queues/counters", (c) =>
    c.json({
      provider: rt.provider.name,
      durability: rt.provider.counters(),
      lineage: rt.lineage.counters(),
    }),
  );

  app.get("/queues/stats", async (c) => {
    const q = readQuery(c, SourceQuery);
    const stats = await admin().stats(sourceOf(q));
    return c.json({
      destination: stats.destination,
      subscription: stats.subscription ?? null,
      depth: stats.depth,
      consumers: stats.consumers,
      in_flight: stats.inFlight,
      dlq_depth: stats.dlqDepth,
    });
  });

  app.get("/queues/dlq", async (c) => {
    const q = readQuery(c, BrowseQuery);
    const page = await admin().browseDeadLetters(sourceOf(q), { offset: q.offset, limit: q.limit });
    return c.json({
      total: page.total,
      offset: page.offset,
      limit: q.limit,
      items: page.items.map(deadLetterJson),
    });
  });

  app.post("/queues/dlq/redrive", async (c) => {
    const body = await readJson(c, RedriveBody);
    await assertRedriveAllowed(rt.executions, body.destination, body.force);
    const { redriven } = await admin().redriveAll(sourceOf(body));
    return c.json({ destination: body.destination, redriven });
  });

  app.post("/queues/dlq/redrive-one", async (c) => {
    const body = await readJson(c, RedriveOneBody);
    await assertRedriveAllowed(rt.executions, body.destination, body.force);
    const { redriven } = await admin().redriveOne(sourceOf(body), body.message_id);
    if (!redriven) throw missing(body.destination, body.message_id);
    return c.json({ destination: body.destination, message_id: body.message_id, redriven });
  });

  app.post("/queues/dlq/discard", async (c) => {
    const body = await readJson(c, OneBody);
    const { discarded } = await admin().discardOne(sourceOf(body), body.message_id);
    if (!discarded) throw missing(body.destination, body.message_id);
    return c.json({ destination: body.destination, message_id: body.message_id, discarded });
  });

  // A refusal (unknown queue, consumers attached, not empty with if_empty) is an answer, not an error.
  app.post("/queues/delete", async (c) => {
    const body = await readJson(c, DeleteBody);
    const result = await admin().deleteDestination(sourceOf(body), {
      ifEmpty: body.if_empty,
      keepDeadLetters: body.keep_dead_letters,
    });
    return c.json({
      destination: body.destination,
      subscription: body.subscription ?? null,
      deleted: result.deleted,
      reason: result.reason ?? null,
      dead_letters_kept: result.deadLettersKept ?? 0,
    });
  });

  return app;
}

function missing(destination: string, messageId: string): FactflowError {
  return new FactflowError(
    "not_found",
    `[factflow/server] no dead letter "${messageId}" in ${destination}; browse GET /api/v1/queues/dlq?destination=${destination}`,
  );
}
