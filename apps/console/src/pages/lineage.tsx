import { useMemo, useRef, useState } from "preact/hooks";
import { api, type LineageRow, type Page, query } from "../api.ts";
import { ErrorBox, Loading, Section, StatusBadge, useLoad } from "../components/common.tsx";
import { type GraphEdge, type GraphNode, GraphView } from "../components/graph-view.tsx";
import { PageTitle } from "../components/page-title.tsx";
import { Time } from "../components/time.tsx";
import { VirtualTable } from "../components/virtual-table.tsx";
import { shortId } from "../format.ts";
import { href, hrefWith, navigate, type Route } from "../router.ts";
import { LineageRowDetail } from "./lineage-row-detail.tsx";
import { TreeTruncatedNotice, treeLimit } from "./lineage-tree-notice.tsx";

/** Rows fetched per request while scrolling the execution's lineage (the API's maximum). */
const PAGE = 500;
/** Above this many messages the tree is listed, not drawn: a drawing that large helps nobody. */
const MAX_DRAWN = 400;
/** Executions with more lineage rows than this ask before fetching a tree (its first rows can be thousands). */
const LARGE_EXECUTION = 20_000;

const COLUMNS = ["message", "kind", "route", "adapter", "attempt", "status", "error", "started", "details"];

function errorText(row: LineageRow): string {
  return row.error === null ? "" : `${row.error.class}: ${row.error.message}`;
}

function cells(row: LineageRow, executionId: string, select: (row: LineageRow) => void) {
  return [
    <a key="m" href={href("executions", executionId, "lineage", row.message_id)} title={row.message_id}>
      {shortId(row.message_id)}
    </a>,
    row.kind,
    row.route,
    row.adapter ?? "",
    row.attempt,
    <StatusBadge key="s" status={row.status} />,
    <span key="e" class="error-text" title={errorText(row)}>
      {errorText(row)}
    </span>,
    <Time key="t" iso={row.started_at} relative={false} />,
    <button key="d" type="button" data-testid="row-details" onClick={() => select(row)}>
      view
    </button>,
  ];
}

/**
 * Every lineage row of an execution, fetched a page at a time as the user scrolls: an execution
 * with 100,000 rows loads only the pages in view. The app remounts it when the filters change.
 */
export function LineageListPage(props: { executionId: string; route: Route }) {
  const kind = props.route.params.get("kind") ?? "";
  const status = props.route.params.get("status") ?? "";
  const routeName = props.route.params.get("route") ?? "";
  const base = `/executions/${encodeURIComponent(props.executionId)}/lineage`;
  const filters = { kind, status, route: routeName };
  const pages = useRef(new Map<number, LineageRow[] | "loading">());
  const [total, setTotal] = useState<number | undefined>();
  const [, setLoaded] = useState(0);
  const [error, setError] = useState<Error | undefined>();
  const [selected, setSelected] = useState<LineageRow | undefined>();

  const loadPage = (page: number) => {
    if (pages.current.has(page)) return;
    pages.current.set(page, "loading");
    api<Page<LineageRow>>("GET", `${base}${query({ ...filters, offset: page * PAGE, limit: PAGE })}`).then(
      (result) => {
        pages.current.set(page, result.items);
        setTotal(result.total);
        setLoaded((n) => n + 1);
      },
      (e: Error) => {
        pages.current.delete(page);
        setError(e);
      },
    );
  };
  if (total === undefined) loadPage(0);

  const rowAt = (index: number) => {
    const page = pages.current.get(Math.floor(index / PAGE));
    return Array.isArray(page) ? page[index % PAGE] : undefined;
  };
  const setFilter = (changes: Record<string, string>) =>
    navigate(hrefWith(["executions", props.executionId, "lineage"], { ...filters, ...changes }));

  return (
    <div>
      <PageTitle
        title={`Lineage of execution ${props.executionId}`}
        tabTitle={`Lineage of execution ${shortId(props.executionId)}`}
      />
      <Section
        title="Rows"
        actions={<a href={href("executions", props.executionId)}>back to the execution</a>}
      >
        <form class="filters" onSubmit={(e) => e.preventDefault()}>
          <label>
            kind{" "}
            <select value={kind} onChange={(e) => setFilter({ kind: (e.target as HTMLSelectElement).value })}>
              <option value="">any</option>
              <option value="message">message</option>
              <option value="adapter">adapter</option>
            </select>
          </label>
          <label>
            status{" "}
            <select
              value={status}
              onChange={(e) => setFilter({ status: (e.target as HTMLSelectElement).value })}
            >
              <option value="">any</option>
              {["pending", "initiated", "processing", "completed", "failed", "abandoned"].map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </label>
          <label>
            route{" "}
            <input
              value={routeName}
              onChange={(e) => setFilter({ route: (e.target as HTMLInputElement).value.trim() })}
            />
          </label>
          <span class="muted">{total === undefined ? "loading…" : `${total} rows`}</span>
        </form>
        <ErrorBox error={error} />
        <VirtualTable
          testId="lineage-rows"
          label="lineage rows of the execution"
          count={total ?? 0}
          columns={COLUMNS}
          rowAt={rowAt}
          renderRow={(row) => cells(row, props.executionId, setSelected)}
          onRange={(start, end) => {
            for (let page = Math.floor(start / PAGE); page <= Math.floor(end / PAGE); page++) loadPage(page);
          }}
        />
      </Section>
      {selected === undefined ? null : (
        <LineageRowDetail
          row={selected}
          executionId={props.executionId}
          onClose={() => setSelected(undefined)}
        />
      )}
    </div>
  );
}

interface TreeAnswer {
  execution_id: string;
  message_id: string;
  /** The most rows the server was asked for; the ancestors' rows come even beyond it. */
  limit: number;
  /** Descendants were left out (breadth-first, the farthest first) to keep within `limit`. */
  truncated: boolean;
  items: LineageRow[];
}

/** One message's tree across hops: ancestors and descendants, as a graph and a virtualised table. */
export function LineageTreePage(props: { executionId: string; messageId: string; route: Route }) {
  const [confirmed, setConfirmed] = useState(false);
  const limit = treeLimit(props.route.params);
  const size = useLoad(
    () =>
      api<Page<LineageRow>>(
        "GET",
        `/executions/${encodeURIComponent(props.executionId)}/lineage?limit=1`,
      ).then((page) => page.total),
    [props.executionId],
  );
  const heading = (
    <PageTitle
      title={`Lineage of message ${props.messageId}`}
      tabTitle={`Lineage of message ${shortId(props.messageId)}`}
    />
  );
  if (size.data === undefined)
    return (
      <div>
        {heading}
        {size.error === undefined ? <Loading what="the lineage" /> : <ErrorBox error={size.error} />}
      </div>
    );
  // A limit in the URL was asked for (the notice of a cut tree, or a link someone shared): no need to ask again.
  if (size.data > LARGE_EXECUTION && !confirmed && limit === undefined) {
    return (
      <div>
        {heading}
        <Section title="A large execution">
          <p data-testid="large-tree">
            This execution has {size.data} lineage rows. The tree of an early message (the first one, or a
            large fan-out's parent) can hold most of them; the API returns its first rows (its ancestors, then
            descendants level by level) and says when it left the rest out.
          </p>
          <button type="button" data-testid="load-tree" onClick={() => setConfirmed(true)}>
            load this message's tree
          </button>{" "}
          <a href={href("executions", props.executionId, "lineage")}>browse the rows page by page instead</a>
        </Section>
      </div>
    );
  }
  return (
    <div>
      {heading}
      <LineageTree
        key={`${props.messageId}\u0000${limit ?? ""}`}
        executionId={props.executionId}
        messageId={props.messageId}
        limit={limit}
      />
    </div>
  );
}

function LineageTree(props: { executionId: string; messageId: string; limit: number | undefined }) {
  const tree = useLoad(
    () =>
      api<TreeAnswer>(
        "GET",
        `/executions/${encodeURIComponent(props.executionId)}/lineage/${encodeURIComponent(props.messageId)}${query({ limit: props.limit })}`,
      ),
    [props.executionId, props.messageId, props.limit],
  );
  const rows = tree.data?.items ?? [];
  const [selected, setSelected] = useState<LineageRow | undefined>();
  const graph = useMemo(() => buildTree(rows, props.executionId, props.messageId), [rows]);

  if (tree.data === undefined)
    return tree.error === undefined ? (
      <Loading what={props.limit === undefined ? "the tree" : `the tree (up to ${props.limit} rows)`} />
    ) : (
      <ErrorBox error={tree.error} />
    );
  return (
    <div data-testid="lineage-page" data-message-id={props.messageId}>
      <Section
        title="Tree"
        actions={<a href={href("executions", props.executionId, "lineage")}>all rows of the execution</a>}
      >
        <p
          class="muted"
          data-testid="lineage-summary"
          data-messages={graph.messages}
          data-rows={rows.length}
          data-truncated={String(tree.data.truncated)}
        >
          {graph.messages} messages, {rows.length} rows (message hops, adapter attempts and errors)
          {graph.messages > MAX_DRAWN
            ? ` · the graph shows the first ${MAX_DRAWN} messages; the table lists all`
            : ""}
        </p>
        {tree.data.truncated ? (
          <TreeTruncatedNotice
            executionId={props.executionId}
            messageId={props.messageId}
            rows={rows.length}
            limit={tree.data.limit}
          />
        ) : null}
        <GraphView
          testId="lineage-graph"
          label="the message's lineage tree"
          nodes={graph.nodes}
          edges={graph.edges}
          focus={props.messageId}
        />
      </Section>
      <Section title="Rows">
        <VirtualTable
          testId="lineage-tree-rows"
          label="rows of the message's tree"
          count={rows.length}
          columns={COLUMNS}
          rowAt={(i) => rows[i]}
          renderRow={(row) => cells(row, props.executionId, setSelected)}
        />
      </Section>
      {selected === undefined ? null : (
        <LineageRowDetail
          row={selected}
          executionId={props.executionId}
          onClose={() => setSelected(undefined)}
        />
      )}
    </div>
  );
}

/**
 * Message rows become nodes (one per message id, showing its last attempt); a child message names
 * the adapter row that emitted it as its parent, so edges go from that row's message to the child,
 * labelled with the adapter.
 */
function buildTree(rows: LineageRow[], executionId: string, focus: string) {
  const messages = new Map<string, { row: LineageRow; attempts: number }>();
  const adapterRows = new Map<string, LineageRow>();
  const adapterFailures = new Map<string, number>();
  for (const row of rows) {
    if (row.kind === "adapter") {
      adapterRows.set(row.id, row);
      if (row.status === "failed")
        adapterFailures.set(row.message_id, (adapterFailures.get(row.message_id) ?? 0) + 1);
      continue;
    }
    const seen = messages.get(row.message_id);
    if (seen === undefined || row.attempt >= seen.row.attempt) {
      messages.set(row.message_id, { row, attempts: Math.max(row.attempt, seen?.attempts ?? 0) });
    }
  }
  const nodes: GraphNode[] = [];
  const edges: GraphEdge[] = [];
  const drawn = new Set<string>();
  // The focused message is always drawn, whatever the cap leaves out.
  const ordered = [...messages].sort(([a], [b]) => Number(b === focus) - Number(a === focus));
  for (const [id, entry] of ordered) {
    if (drawn.size >= MAX_DRAWN) break;
    drawn.add(id);
    const errors = adapterFailures.get(id) ?? 0;
    nodes.push({
      id,
      label: `${entry.row.route} · ${shortId(id)}`,
      detail: `${entry.row.status} · attempt ${entry.attempts}${errors > 0 ? ` · ${errors} error${errors === 1 ? "" : "s"}` : ""}`,
      kind: `${entry.row.status}${id === focus ? " focus" : ""}`,
      href: href("executions", executionId, "lineage", id),
    });
  }
  for (const [id, entry] of messages) {
    const parent = parentMessage(entry.row, adapterRows);
    if (parent !== undefined && drawn.has(id) && drawn.has(parent.messageId))
      edges.push({
        from: parent.messageId,
        to: id,
        ...(parent.adapter === undefined ? {} : { label: parent.adapter }),
      });
  }
  return { nodes, edges, messages: messages.size };
}

/** The message a message came from: its parent is the emitting adapter row (or a message row). */
function parentMessage(row: LineageRow, adapterRows: Map<string, LineageRow>) {
  if (row.parent_id === null) return undefined;
  const adapter = adapterRows.get(row.parent_id);
  if (adapter !== undefined) return { messageId: adapter.message_id, adapter: adapter.adapter ?? undefined };
  return { messageId: row.parent_id, adapter: undefined };
}
