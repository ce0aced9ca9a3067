import * as v from "valibot";
import { MessageValueSourceSchema, readMessageValue } from "./queue-definition.js";

const scalar = v.union([v.string(), v.number(), v.boolean(), v.null()]);
const adapterName = v.pipe(
  v.string(),
  v.regex(/^[A-Za-z0-9_.:-]+$/, 'use only letters, digits, "_", ".", ":" and "-"'),
  v.maxLength(120),
);

/** A predicate on one payload field or header: exactly one operator. */
const PredicateSchema = v.pipe(
  v.strictObject({
    field: v.optional(v.string()),
    header: v.optional(v.string()),
    equals: v.optional(scalar),
    not_equals: v.optional(scalar),
    in: v.optional(v.array(scalar)),
    exists: v.optional(v.boolean()),
  }),
  v.check(
    (p) => (p.field === undefined) !== (p.header === undefined),
    'a condition names exactly one of field (payload path, e.g. "order.kind") or header',
  ),
  v.check(
    (p) => [p.equals, p.not_equals, p.in, p.exists].filter((x) => x !== undefined).length === 1,
    "a condition has exactly one operator: equals, not_equals, in or exists",
  ),
  v.check(
    (p) => p.field === undefined || v.is(MessageValueSourceSchema, { field: p.field }),
    'a condition field is a path of names joined by ".", e.g. "order.kind"',
  ),
);

/**
 * A route condition, evaluated before its adapters. Either `{ adapter: <name> }`, a registered
 * adapter used as a predicate (its output `data` of exactly `false` skips the message), or a small
 * declarative predicate on the payload or a header.
 */
export const ConditionSchema = v.union(
  [
    v.strictObject({ adapter: adapterName, config: v.optional(v.record(v.string(), v.unknown()), {}) }),
    PredicateSchema,
  ],
  'a condition is { adapter: "<registered adapter>" } or a predicate like { field: "kind", equals: "order" }',
);
export type ConditionConfig = v.InferOutput<typeof ConditionSchema>;
export type ConditionPredicate = Exclude<ConditionConfig, { adapter: string }>;

/** True when a condition calls a registered adapter rather than testing a value. */
export function isAdapterCondition(
  condition: ConditionConfig,
): condition is Extract<ConditionConfig, { adapter: string }> {
  return "adapter" in condition;
}

/** Evaluates a declarative predicate against a message; JSON equality for scalars. */
export function evaluatePredicate(
  predicate: ConditionPredicate,
  body: unknown,
  headers: Readonly<Record<string, string>> | undefined,
): boolean {
  const source =
    predicate.field !== undefined ? { field: predicate.field } : { header: predicate.header ?? "" };
  const value = readMessageValue(source, body, headers);
  if (predicate.exists !== undefined) return (value !== undefined) === predicate.exists;
  if (predicate.equals !== undefined) return value === predicate.equals;
  if (predicate.not_equals !== undefined) return value !== predicate.not_equals;
  return (predicate.in ?? []).some((candidate) => candidate === value);
}
