import { parseDestination } from "@factflow/protocols";
import type { FactflowRuntime } from "@factflow/runtime";
import { Hono } from "hono";
import * as v from "valibot";
import { readJson } from "../http-input.js";
import { assertRedriveAllowed } from "../redrive-guard.js";
import { cleanupDone } from "./queues.js";
import type { RouteDoc } from "./route-doc.js";
import { jsonBody } from "./typed-input.js";

/** The most dead letters one bulk call acts on (a page of the console holds fewer). */
const MAX_IDS = 500;

const SelectionFields = {
  destination: v.pipe(
    v.string(),
    v.check(
      (d) => !("error" in parseDestination(d)),
      "must be a destination such as /queue/<name> or /topic/<name>",
    ),
  ),
  subscription: v.optional(v.pipe(v.string(), v.minLength(1))),
  message_ids: v.pipe(
    v.array(v.pipe(v.string(), v.minLength(1))),
    v.minLength(1, "name at least one dead letter"),
    v.maxLength(MAX_IDS, `name at most ${MAX_IDS} dead letters per call`),
  ),
};
const DiscardManyBody = v.strictObject(SelectionFields);
const RedriveManyBody = v.strictObject({ ...SelectionFields, force: v.optional(v.boolean(), false) });

export const DEAD_LETTER_BULK_ROUTES: readonly RouteDoc[] = [
  {
    method: "post",
    path: "/queues/dlq/redrive-many",
    summary:
      "Redrive the named dead letters; answers which were redriven and which were not there. 409 execution_not_running as for redrive, unless force",
    tag: "queues",
    body: RedriveManyBody,
  },
  {
    method: "post",
    path: "/queues/dlq/discard-many",
    summary: "Discard the named dead letters for good; answers which were discarded and which were not there",
    tag: "queues",
    body: DiscardManyBody,
  },
];

function sourceOf(body: { destination: string; subscription?: string | undefined }) {
  return body.subscription === undefined
    ? { destination: body.destination }
    : { destination: body.destination, subscription: body.subscription };
}

/**
 * A selection of dead letters acted on in one call: the console's "redrive selected" and "discard
 * selected". Each id goes through the same admin call as the one-at-a-time routes, in order; ids no
 * longer there (someone else took them) are reported, not errors.
 */
export function deadLetterBulkRoutes(rt: FactflowRuntime) {
  const admin = () => rt.provider.admin;
  return new Hono()
    .post("/queues/dlq/redrive-many", jsonBody(RedriveManyBody), async (c) => {
      const body = await readJson(c, RedriveManyBody);
      await assertRedriveAllowed(rt.executions, body.destination, body.force);
      await cleanupDone(rt, body.destination);
      const redriven: string[] = [];
      const missing: string[] = [];
      for (const id of new Set(body.message_ids)) {
        const result = await admin().redriveOne(sourceOf(body), id);
        (result.redriven ? redriven : missing).push(id);
      }
      return c.json({ destination: body.destination, redriven, missing });
    })
    .post("/queues/dlq/discard-many", jsonBody(DiscardManyBody), async (c) => {
      const body = await readJson(c, DiscardManyBody);
      await cleanupDone(rt, body.destination);
      const discarded: string[] = [];
      const missing: string[] = [];
      for (const id of new Set(body.message_ids)) {
        const result = await admin().discardOne(sourceOf(body), id);
        (result.discarded ? discarded : missing).push(id);
      }
      return c.json({ destination: body.destination, discarded, missing });
    });
}
