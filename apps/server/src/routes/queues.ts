import type { DeadLetter, DeadLetterSource } from "@factflow/protocols";
import { FactflowError, parseDestination, QueueDefinitionSchema } from "@factflow/protocols";
import { type FactflowRuntime, queueDefinitionStoreFor } from "@factflow/runtime";
import { Hono } from "hono";
import * as v from "valibot";
import { HttpProblem } from "../http-errors.js";
import { PagingQuery, readJson, readQuery } from "../http-input.js";
import { assertPurgeAllowed, assertRedriveAllowed, executionOfDestination } from "../redrive-guard.js";
import { namedQueueStatus } from "./queue-status.js";
import type { RouteDoc } from "./route-doc.js";
import { jsonBody, queryParams } from "./typed-input.js";

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
/** Purges refuse queues of running executions unless `force` is true (see purge-guard). */
const PurgeBody = v.strictObject({ ...SourceFields, force });
const DeleteBody = v.strictObject({
  ...SourceFields,
  if_empty: v.optional(v.boolean(), false),
  keep_dead_letters: v.optional(v.boolean(), true),
});

/** The routes below, for the OpenAPI document. */
export const QUEUE_ROUTES: readonly RouteDoc[] = [
  { method: "get", path: "/queues", summary: "Queues and topics of the provider", tag: "queues" },
  {
    method: "get",
    path: "/queues/counters",
    summary:
      "Durability counters since start: the provider's (published, confirmed, acked, retried, deadLettered, redelivered, superseded, lost) and lineage's (written, retriedWrites, lost, queued)",
    tag: "queues",
  },
  {
    method: "get",
    path: "/queues/stats",
    summary: "Depth, consumers, in flight, DLQ depth",
    tag: "queues",
    query: SourceQuery,
  },
  {
    method: "get",
    path: "/queues/dlq",
    summary: "Browse dead letters (offset/limit)",
    tag: "queues",
    query: BrowseQuery,
  },
  {
    method: "post",
    path: "/queues/dlq/redrive",
    summary:
      "Redrive every dead letter. 409 execution_not_running when the queue's execution (/queue/<execution_id>/...) is over: use POST /executions/{id}/replay, or force: true",
    tag: "queues",
    body: RedriveBody,
  },
  {
    method: "post",
    path: "/queues/dlq/redrive-one",
    summary:
      "Redrive one dead letter. 409 execution_not_running when the queue's execution is over (see redrive)",
    tag: "queues",
    body: RedriveOneBody,
  },
  {
    method: "post",
    path: "/queues/dlq/discard",
    summary: "Discard one dead letter",
    tag: "queues",
    body: OneBody,
  },
  {
    method: "post",
    path: "/queues/delete",
    summary: "Delete a queue or subscription (dead letters kept unless keep_dead_letters is false)",
    tag: "queues",
    body: DeleteBody,
  },
  {
    method: "post",
    path: "/queues/purge",
    summary:
      "Remove the messages waiting in a queue, keeping the queue, its consumers and its dead letters. 409 execution_running when the queue's execution (/queue/<execution_id>/...) is running, unless force: true; 501 purge_not_supported on a provider without purge",
    tag: "queues",
    body: PurgeBody,
  },
  {
    method: "get",
    path: "/queues/{name}",
    summary:
      "A named queue: its stored definition, and per running execution reading it: depth, consumers, in flight, dead letters and effective settings",
    tag: "queues",
  },
  {
    method: "put",
    path: "/queues/{name}/definition",
    summary:
      "Merge a queue definition (a queues: entry of a pipeline), apply it to every running route reading the queue, then store it; answers once the consumers run with it",
    tag: "queues",
    body: QueueDefinitionSchema,
  },
];

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

/**
 * Queue admin through `provider.admin`: list, stats, DLQ browse/redrive/discard, delete. One chain,
 * returned as built, so its types reach `AppType` (Hono's typed client).
 */
export function queueRoutes(rt: FactflowRuntime) {
  const admin = () => rt.provider.admin;
  // Named queue definitions (`queues:` at runtime), served after the fixed paths.
  const definitions = rt.queueDefinitions ?? queueDefinitionStoreFor(rt.settings.data_dir);

  return (
    new Hono()
      .get("/queues", async (c) => {
        const items = await admin().listDestinations();
        return c.json({ provider: rt.provider.name, items });
      })
      // Durability counters since connect: an operator compares published/confirmed/acked and checks
      // that `lost` (provider) and `lost` (lineage) stay 0.
      .get("/queues/counters", (c) =>
        c.json({
          provider: rt.provider.name,
          durability: rt.provider.counters(),
          lineage: rt.lineage.counters(),
        }),
      )
      .get("/queues/stats", queryParams(SourceQuery), async (c) => {
        const q = readQuery(c, SourceQuery);
        const stats = await admin().stats(sourceOf(q));
        return c.json({
          destination: stats.destination,
          subscription: stats.subscription ?? null,
          depth: stats.depth,
          consumers: stats.consumers,
          in_flight: stats.inFlight,
          dlq_depth: stats.dlqDepth,
          // Only Artemis can tell (null elsewhere): deliveries the broker will not redeliver on its own.
          stranded: stats.stranded ?? null,
        });
      })
      .get("/queues/dlq", queryParams(BrowseQuery), async (c) => {
        const q = readQuery(c, BrowseQuery);
        const page = await admin().browseDeadLetters(sourceOf(q), { offset: q.offset, limit: q.limit });
        return c.json({
          total: page.total,
          offset: page.offset,
          limit: q.limit,
          items: page.items.map(deadLetterJson),
        });
      })
      .post("/queues/dlq/redrive", jsonBody(RedriveBody), async (c) => {
        const body = await readJson(c, RedriveBody);
        await assertRedriveAllowed(rt.executions, body.destination, body.force);
        await cleanupDone(rt, body.destination);
        const { redriven } = await admin().redriveAll(sourceOf(body));
        return c.json({ destination: body.destination, redriven });
      })
      .post("/queues/dlq/redrive-one", jsonBody(RedriveOneBody), async (c) => {
        const body = await readJson(c, RedriveOneBody);
        await assertRedriveAllowed(rt.executions, body.destination, body.force);
        await cleanupDone(rt, body.destination);
        const { redriven } = await admin().redriveOne(sourceOf(body), body.message_id);
        if (!redriven) throw missing(body.destination, body.message_id);
        return c.json({ destination: body.destination, message_id: body.message_id, redriven });
      })
      .post("/queues/dlq/discard", jsonBody(OneBody), async (c) => {
        const body = await readJson(c, OneBody);
        await cleanupDone(rt, body.destination);
        const { discarded } = await admin().discardOne(sourceOf(body), body.message_id);
        if (!discarded) throw missing(body.destination, body.message_id);
        return c.json({ destination: body.destination, message_id: body.message_id, discarded });
      })
      // A refusal (unknown queue, consumers attached, not empty with if_empty) is an answer, not an error.
      .post("/queues/delete", jsonBody(DeleteBody), async (c) => {
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
      })
      .post("/queues/purge", jsonBody(PurgeBody), async (c) => {
        const body = await readJson(c, PurgeBody);
        const provider = admin();
        if (provider.purgeDestination === undefined) {
          throw new HttpProblem(
            501,
            "purge_not_supported",
            "[factflow/server] this server's provider cannot purge a queue in place; POST /api/v1/queues/delete removes the queue with its waiting messages",
          );
        }
        await assertPurgeAllowed(rt.executions, body.destination, body.force);
        const result = await provider.purgeDestination(sourceOf(body));
        return c.json({
          destination: body.destination,
          subscription: body.subscription ?? null,
          purged: result.purged,
          reason: result.reason ?? null,
        });
      })
      .get("/queues/:name", async (c) => {
        const name = queueName(c.req.param("name"));
        return c.json(await namedQueueStatus(rt, name, await definitions.get(name)));
      })
      // Answers once every running route reading the queue re-subscribed with it, and it is stored.
      .put("/queues/:name/definition", jsonBody(QueueDefinitionSchema), async (c) => {
        const name = queueName(c.req.param("name"));
        const body = await readJson(c, QueueDefinitionSchema);
        const result = await definitions.define(name, body);
        return c.json(result);
      })
  );
}

/**
 * Waits until the cleanup of the execution owning `destination` (if it ended just now) is over, so
 * a dead-letter operation never races the deletion of that execution's queues.
 */
export async function cleanupDone(rt: FactflowRuntime, destination: string): Promise<void> {
  const executionId = executionOfDestination(destination);
  if (executionId !== undefined) await rt.queueCleanup?.idle(executionId);
}

const QUEUE_NAME = /^[A-Za-z0-9_.:-]{1,120}$/;

function queueName(raw: string): string {
  if (!QUEUE_NAME.test(raw)) {
    throw new FactflowError(
      "invalid_argument",
      `[factflow/server] queue name ${JSON.stringify(raw.slice(0, 130))} is invalid: use the name a route's inbound queue has (letters, digits, "_", ".", ":" and "-")`,
    );
  }
  return raw;
}

function missing(destination: string, messageId: string): FactflowError {
  return new FactflowError(
    "not_found",
    `[factflow/server] no dead letter "${messageId}" in ${destination}; browse GET /api/v1/queues/dlq?destination=${destination}`,
  );
}
