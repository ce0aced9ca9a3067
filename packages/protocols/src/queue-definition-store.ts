import * as v from "valibot";
import { FactflowError } from "./errors.js";
import { type QueueDefinition, QueueDefinitionSchema } from "./pipeline-config.js";

/**
 * Called when a named queue definition changes at runtime, with the merged definition. It resolves
 * once every consumer of that queue in this process runs with it (or rejects, and the change is not
 * stored).
 */
export type QueueDefinitionListener = (name: string, definition: QueueDefinition) => Promise<void>;

/**
 * Durable named queue definitions kept by the application (the server's `PUT
 * /api/v1/queues/{name}/definition`). They override the queue settings of every route that reads a
 * queue of that name, in every execution: applied when an execution starts or resumes, and pushed
 * to running executions when they change.
 */
export interface QueueDefinitionStoreProtocol {
  /** Every stored definition, by queue name. */
  all(): Promise<ReadonlyMap<string, QueueDefinition>>;
  /** Registers a listener; returns the function that removes it. */
  onChange(listener: QueueDefinitionListener): () => void;
}

/** What a store's `define` answers (the body of `PUT /api/v1/queues/{name}/definition`). */
export interface QueueDefinitionChange {
  readonly queue: string;
  /** False when the merged definition equals the stored one. */
  readonly changed: boolean;
  readonly definition: QueueDefinition;
}

/**
 * The definition stored after `patch` is applied to `current`: fields of the patch replace the
 * stored ones, `retry` is merged field by field, and the result is validated (defaults filled in).
 * Every store merges through this, so a PUT means the same whatever keeps the definitions.
 */
export function mergeQueueDefinition(current: QueueDefinition, patch: QueueDefinition): QueueDefinition {
  return v.parse(QueueDefinitionSchema, {
    ...current,
    ...patch,
    ...(patch.retry === undefined ? {} : { retry: { ...current.retry, ...patch.retry } }),
  });
}

/** True when the two definitions say the same (key order and undefined fields aside). */
export function sameQueueDefinition(a: QueueDefinition, b: QueueDefinition): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

/**
 * A stored definition read back (a file, a table row), validated; `source` names where it came from
 * in the `config_invalid` error thrown when it is not a valid definition.
 */
export function parseQueueDefinition(value: unknown, source: string): QueueDefinition {
  const parsed = v.safeParse(QueueDefinitionSchema, value);
  if (parsed.success) return parsed.output;
  throw new FactflowError(
    "config_invalid",
    `${source} is not a valid queue definition (${parsed.issues[0]?.message}); fix or remove it`,
  );
}

function canonical(value: unknown): unknown {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>)
      .filter(([, field]) => field !== undefined)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([key, field]) => [key, canonical(field)]),
  );
}
