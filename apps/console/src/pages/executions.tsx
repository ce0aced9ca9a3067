import { useEffect, useState } from "preact/hooks";
import { ApiError, api, type ConfigEntry, type Execution, type Page, query } from "../api.ts";
import { ErrorBox, Pager, Section, StatusBadge, useLoad } from "../components/common.tsx";
import { PageTitle } from "../components/page-title.tsx";
import { Time } from "../components/time.tsx";
import { counterTotals, duration, shortId } from "../format.ts";
import { href, hrefWith, navigate, type Route } from "../router.ts";
import { followEvents } from "../sse.ts";
import { canResume, type SystemInfo, useSystemInfo } from "../system-info.ts";
import {
  type ListOrder,
  listOrderParams,
  readListOrder,
  SortHeader,
  TimeRange,
} from "./execution-list-order.tsx";

const LIMIT = 25;
/** SSE streams the list keeps open at once: browsers allow six connections per origin. */
const MAX_STREAMS = 2;

type Filters = { status: string; config: string; parent: string };

/** One page of executions, in the order and start range asked (the API sorts and filters). */
function listPage(filters: Filters, order: ListOrder, offset: number): Promise<Page<Execution>> {
  return api<Page<Execution>>(
    "GET",
    `/executions${query({ ...filters, ...listOrderParams(order), offset, limit: LIMIT })}`,
  );
}

/** Executions: filters, order, paging, live updates, start / cancel / resume. */
export function ExecutionsPage(props: { route: Route }) {
  const p = props.route.params;
  const status = p.get("status") ?? "";
  const config = p.get("config") ?? "";
  const parent = p.get("parent") ?? "";
  const offset = Number(p.get("offset") ?? "0") || 0;
  const order = readListOrder(p);
  const orderKey = JSON.stringify(order);
  const list = useLoad(
    () => listPage({ status, config, parent }, order, offset),
    [status, config, parent, offset, orderKey],
    3000,
  );
  const [actionError, setActionError] = useState<Error | undefined>();
  const info = useSystemInfo(3000);

  // Live: follow the running executions on this page; each event refreshes the list.
  const running = (list.data?.items ?? []).filter((e) => e.status === "running").slice(0, MAX_STREAMS);
  const runningKey = running.map((e) => e.id).join(",");
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const refresh = () => {
      timer ??= setTimeout(() => {
        timer = undefined;
        list.reload();
      }, 300);
    };
    const stops = running.map((e) => followEvents(e.id, refresh));
    return () => {
      for (const stop of stops) stop();
      clearTimeout(timer);
    };
  }, [runningKey, list.reload]);

  const setFilter = (changes: Record<string, string | number | undefined>) =>
    navigate(
      hrefWith(["executions"], { status, config, parent, ...listOrderParams(order), offset, ...changes }),
    );
  // A new order or range starts again from the first page.
  const setOrder = (changes: Partial<ListOrder>) =>
    navigate(
      hrefWith(["executions"], {
        status,
        config,
        parent,
        ...listOrderParams({ ...order, ...changes }),
        offset: 0,
      }),
    );

  async function act(id: string, action: "cancel" | "resume") {
    setActionError(undefined);
    try {
      await api("POST", `/executions/${encodeURIComponent(id)}/${action}`, {});
      list.reload();
      info.reload();
    } catch (e) {
      setActionError(e as Error);
    }
  }

  return (
    <div>
      <PageTitle title="Executions" />
      <StartForm onStarted={(id) => navigate(href("executions", id))} />
      <Section title="Executions">
        <form class="filters" onSubmit={(e) => e.preventDefault()}>
          <label>
            status{" "}
            <select
              data-testid="filter-status"
              value={status}
              onChange={(e) => setFilter({ status: (e.target as HTMLSelectElement).value, offset: 0 })}
            >
              <option value="">any</option>
              {["running", "completed", "failed", "cancelled"].map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </label>
          <label>
            config{" "}
            <input
              data-testid="filter-config"
              value={config}
              placeholder="name"
              onChange={(e) => setFilter({ config: (e.target as HTMLInputElement).value.trim(), offset: 0 })}
            />
          </label>
          <label>
            parent{" "}
            <input
              data-testid="filter-parent"
              value={parent}
              placeholder="execution id"
              onChange={(e) => setFilter({ parent: (e.target as HTMLInputElement).value.trim(), offset: 0 })}
            />
          </label>
          <TimeRange current={order} onChange={setOrder} />
        </form>
        <ErrorBox error={list.error ?? actionError} />
        <table class="grid" data-testid="executions-table">
          <thead>
            <tr>
              <th>id</th>
              <SortHeader sort="status" label="status" current={order} onChange={setOrder} />
              <th>config</th>
              <SortHeader sort="started" label="started" current={order} onChange={setOrder} />
              <th>ended</th>
              <SortHeader sort="duration" label="duration" current={order} onChange={setOrder} />
              <th>acked / failed / published</th>
              <th>actions</th>
            </tr>
          </thead>
          <tbody>
            {(list.data?.items ?? []).map((e) => {
              const totals = counterTotals(e.counters);
              return (
                <tr key={e.id} data-execution-id={e.id} data-status={e.status}>
                  <td>
                    <a href={href("executions", e.id)} title={e.id}>
                      {shortId(e.id)}
                    </a>
                    {e.parent_execution_id === null ? null : (
                      <span
                        class="muted"
                        title={`replay of ${e.parent_execution_id} from ${e.replay_from_route}`}
                      >
                        {" "}
                        ↩ {e.replay_from_route}
                      </span>
                    )}
                  </td>
                  <td>
                    <StatusBadge status={e.status} />
                  </td>
                  <td>
                    {e.config_name}
                    {e.config_version === null ? "" : ` v${e.config_version}`}
                  </td>
                  <td>
                    <Time iso={e.created_at} />
                  </td>
                  <td>
                    <Time iso={e.finished_at} />
                  </td>
                  <td>{duration(e.created_at, e.finished_at)}</td>
                  <td class="num">
                    {totals.acknowledged ?? 0} / {totals.failed ?? 0} / {totals.published ?? 0}
                  </td>
                  <td class="actions">
                    {e.status === "running" ? (
                      <button type="button" data-testid="cancel" onClick={() => act(e.id, "cancel")}>
                        cancel
                      </button>
                    ) : null}
                    {canResume(info.data, e.id, e.status) ? (
                      <button
                        type="button"
                        data-testid="resume"
                        title="continue an execution left running by a stopped server"
                        onClick={() => act(e.id, "resume")}
                      >
                        resume
                      </button>
                    ) : null}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
        {list.data === undefined ? null : (
          <Pager
            total={list.data.total}
            offset={offset}
            limit={LIMIT}
            onPage={(o) => setFilter({ offset: o })}
          />
        )}
      </Section>
    </div>
  );
}

function StartForm(props: { onStarted: (id: string) => void }) {
  const configs = useLoad(() => api<{ items: ConfigEntry[] }>("GET", "/configs"), []);
  const [name, setName] = useState("");
  const [input, setInput] = useState("{}");
  const [error, setError] = useState<Error | undefined>();
  const chosen = name !== "" ? name : (configs.data?.items[0]?.name ?? "");
  // A 429 (every slot busy) holds only until a slot frees up: while it shows, the system info is
  // re-read (keyed on the refusal, so only answers given after it count).
  const busyAt = error instanceof ApiError && error.status === 429 ? error : undefined;
  const slots = useLoad(
    () => (busyAt === undefined ? Promise.resolve(undefined) : api<SystemInfo>("GET", "/system/info")),
    [busyAt],
    busyAt === undefined ? undefined : 2000,
  );
  const busy = busyAt !== undefined;
  const max = slots.data?.settings.max_concurrent;
  const running = slots.data?.executions_running;
  useEffect(() => {
    if (busy && max !== undefined && running !== undefined && running < max) setError(undefined);
  }, [busy, max, running]);

  async function start(e: Event) {
    e.preventDefault();
    setError(undefined);
    let parsed: unknown;
    try {
      parsed = input.trim() === "" ? undefined : JSON.parse(input);
    } catch (err) {
      setError(new Error(`the input is not valid JSON: ${(err as Error).message}`));
      return;
    }
    try {
      const created = await api<{ id: string }>("POST", "/executions", {
        config: chosen,
        ...(parsed === undefined ? {} : { input: parsed }),
      });
      props.onStarted(created.id);
    } catch (err) {
      setError(err as Error);
    }
  }

  return (
    <Section title="Start an execution">
      <form class="start" onSubmit={start} data-testid="start-form">
        <label>
          config{" "}
          <select
            data-testid="start-config"
            value={chosen}
            onChange={(e) => setName((e.target as HTMLSelectElement).value)}
          >
            {(configs.data?.items ?? []).map((c) => (
              <option key={c.name} value={c.name}>
                {c.name} ({c.origin})
              </option>
            ))}
          </select>
        </label>
        <label class="grow">
          input (JSON){" "}
          <textarea
            data-testid="start-input"
            rows={3}
            value={input}
            onInput={(e) => setInput((e.target as HTMLTextAreaElement).value)}
          />
        </label>
        <button type="submit" data-testid="start-button" disabled={chosen === ""}>
          start
        </button>
      </form>
      {busy ? (
        <div class="refusal" role="status" data-testid="busy">
          All {max ?? "the"} execution slots of this server are taken ({busyAt.message}). This notice goes
          away as soon as one frees up.
        </div>
      ) : (
        <ErrorBox error={configs.error ?? error} />
      )}
    </Section>
  );
}
