import {
  EXECUTION_STATUS_ORDER,
  type ExecutionListQuery,
  type ExecutionSort,
  FactflowError,
} from "@factflow/protocols";
import { assertUuid, pageOf } from "./ids.js";

const SORTS = new Set<ExecutionSort>(["started", "duration", "status"]);

/** An `ExecutionListQuery` checked once, for both stores, before any SQL or filtering. */
export interface CheckedListQuery {
  readonly offset: number;
  readonly limit: number;
  readonly from: Date | undefined;
  readonly to: Date | undefined;
  readonly sort: ExecutionSort;
  readonly descending: boolean;
}

export function checkListQuery(query: ExecutionListQuery): CheckedListQuery {
  const { offset, limit } = pageOf(query, 50);
  if (query.status !== undefined && !EXECUTION_STATUS_ORDER.includes(query.status)) {
    throw new FactflowError(
      "invalid_argument",
      `[factflow/lineage] execution status ${JSON.stringify(query.status)} is unknown (running | completed | failed | cancelled).`,
    );
  }
  if (query.parentExecutionId !== undefined) assertUuid(query.parentExecutionId, "parent execution id");
  const sort = query.sort ?? "started";
  if (!SORTS.has(sort)) {
    throw new FactflowError(
      "invalid_argument",
      `[factflow/lineage] execution sort ${JSON.stringify(sort)} is unknown (started | duration | status).`,
    );
  }
  const direction = query.direction ?? "desc";
  if (direction !== "asc" && direction !== "desc") {
    throw new FactflowError(
      "invalid_argument",
      `[factflow/lineage] direction ${JSON.stringify(direction)} must be asc or desc.`,
    );
  }
  return {
    offset,
    limit,
    from: instant(query.startedFrom, "startedFrom"),
    to: instant(query.startedTo, "startedTo"),
    sort,
    descending: direction === "desc",
  };
}

/** ISO 8601 with a zone (`Z` or `±hh:mm`): a time without one would depend on the server's zone. */
const ISO_INSTANT = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,9})?)?(Z|[+-]\d\d:\d\d)$/;

function instant(value: string | Date | undefined, name: string): Date | undefined {
  if (value === undefined) return undefined;
  const date = value instanceof Date ? value : ISO_INSTANT.test(value) ? new Date(value) : undefined;
  if (date === undefined || Number.isNaN(date.getTime())) {
    throw new FactflowError(
      "invalid_argument",
      `[factflow/lineage] ${name} ${JSON.stringify(String(value))} is not an instant (ISO 8601 with a zone, e.g. 2026-01-31T08:00:00Z).`,
    );
  }
  return date;
}
