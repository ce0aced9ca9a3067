/** The executions list's order and start-time range, read from and written to the URL. */

export type Sort = "started" | "duration" | "status";

export interface ListOrder {
  sort: Sort;
  order: "asc" | "desc";
  /** ISO instants (the API's `from`, inclusive, and `to`, exclusive), or "". */
  from: string;
  to: string;
}

export function readListOrder(params: URLSearchParams): ListOrder {
  const sort = params.get("sort");
  const order = params.get("order");
  return {
    sort: sort === "duration" || sort === "status" ? sort : "started",
    // "oldest" is the order links made before the list had other sorts.
    order: order === "asc" || order === "oldest" ? "asc" : "desc",
    from: params.get("from") ?? "",
    to: params.get("to") ?? "",
  };
}

/** The URL form of an order: the defaults are left out so plain links stay plain. */
export function listOrderParams(o: ListOrder): Record<string, string | undefined> {
  return {
    sort: o.sort === "started" ? undefined : o.sort,
    order: o.order === "desc" ? undefined : o.order,
    from: o.from,
    to: o.to,
  };
}

const LABELS: Record<Sort, { asc: string; desc: string }> = {
  started: { asc: "↑ oldest first", desc: "↓ newest first" },
  duration: { asc: "↑ shortest first", desc: "↓ longest first" },
  status: { asc: "↑ running, failed first", desc: "↓ completed first" },
};

/** A column header that sorts: the first click sorts by it (descending), the next flips the order. */
export function SortHeader(props: {
  sort: Sort;
  label: string;
  current: ListOrder;
  onChange: (changes: Partial<ListOrder>) => void;
}) {
  const active = props.current.sort === props.sort;
  const order = props.current.order;
  return (
    <th aria-sort={active ? (order === "asc" ? "ascending" : "descending") : "none"}>
      <button
        type="button"
        class="sort"
        data-testid={`sort-${props.sort}`}
        title={active ? "reverse the order" : `sort by ${props.label}`}
        onClick={() =>
          props.onChange(
            active
              ? { order: order === "asc" ? "desc" : "asc" }
              : { sort: props.sort, order: props.sort === "status" ? "asc" : "desc" },
          )
        }
      >
        {props.label} {active ? LABELS[props.sort][order] : ""}
      </button>
    </th>
  );
}

/** `2026-01-31T08:00` (the reader's local time, as a datetime-local input holds it) from an instant. */
function localInput(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** The instant of a datetime-local value, read in the reader's zone; "" when empty or unreadable. */
function instantOf(local: string): string {
  const d = new Date(local);
  return local === "" || Number.isNaN(d.getTime()) ? "" : d.toISOString();
}

/** Started from / to, in the reader's local time; the URL keeps the instants. */
export function TimeRange(props: { current: ListOrder; onChange: (changes: Partial<ListOrder>) => void }) {
  const { from, to } = props.current;
  return (
    <>
      <label>
        started from{" "}
        <input
          type="datetime-local"
          data-testid="filter-from"
          value={localInput(from)}
          title={from === "" ? "inclusive" : `${from} (inclusive)`}
          onChange={(e) => props.onChange({ from: instantOf((e.target as HTMLInputElement).value) })}
        />
      </label>
      <label>
        to{" "}
        <input
          type="datetime-local"
          data-testid="filter-to"
          value={localInput(to)}
          title={to === "" ? "exclusive" : `${to} (exclusive)`}
          onChange={(e) => props.onChange({ to: instantOf((e.target as HTMLInputElement).value) })}
        />
      </label>
      {from === "" && to === "" ? null : (
        <button type="button" data-testid="clear-range" onClick={() => props.onChange({ from: "", to: "" })}>
          any time
        </button>
      )}
    </>
  );
}
