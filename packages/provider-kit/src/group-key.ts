import { type MessageEnvelope, readPath } from "@factflow/protocols";

/** The group of messages that have no value at the group key: they form one group of their own. */
export const NO_GROUP_KEY = "\u0000";

/** Where a subscription's group key comes from. */
export interface GroupKeySpec {
  /** Body field, a top-level name or a dotted path (`customer.id`). */
  readonly groupBy?: string;
  /** Header name; used when `groupBy` is not set. */
  readonly groupByHeader?: string;
}

/** True when the options name a group key. */
export function hasGroupKey(spec: GroupKeySpec): boolean {
  return spec.groupBy !== undefined || spec.groupByHeader !== undefined;
}

/**
 * The FIFO group of a message: the value at `groupBy` (a string as is, anything else as JSON), or the
 * `groupByHeader` header. A message without one belongs to {@link NO_GROUP_KEY}. Every provider and
 * the kit's group lanes use this one function, so a key means the same everywhere.
 */
export function groupKeyOf(message: Pick<MessageEnvelope, "body" | "headers">, spec: GroupKeySpec): string {
  const value =
    spec.groupBy !== undefined
      ? readPath(message.body, spec.groupBy)
      : spec.groupByHeader === undefined
        ? undefined
        : message.headers[spec.groupByHeader];
  if (value === undefined || value === null) return NO_GROUP_KEY;
  return typeof value === "string" ? value : JSON.stringify(value);
}
