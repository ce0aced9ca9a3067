import { useEffect, useMemo, useState } from "preact/hooks";
import { api, type ExecutionDetail, type PipelineSnapshot, type QueueStats, query } from "../api.ts";
import { ErrorBox, Loading, Section, StatusBadge, useLoad } from "../components/common.tsx";
import { type GraphEdge, type GraphNode, GraphView } from "../components/graph-view.tsx";
import { PageTitle } from "../components/page-title.tsx";
import { Time } from "../components/time.tsx";
import { duration, shortId } from "../format.ts";
import { href, hrefWith, navigate } from "../router.ts";
import { followEvents } from "../sse.ts";
import { canResume, useSystemInfo } from "../system-info.ts";
import { ExecutionInput } from "./execution-input.tsx";
import { addProgress, type RateHistory, RouteRate } from "./route-rates.tsx";

type LiveCounters = Record<string, Record<string, number>>;

/** One execution: live per-route progress, the pipeline graph, completion, parent, replay. */
export function ExecutionPage(props: { id: string }) {
  const path = `/executions/${encodeURIComponent(props.id)}`;
  const detail = useLoad(() => api<ExecutionDetail>("GET", `${path}?snapshot=true`), [props.id]);
  const [live, setLive] = useState<LiveCounters | undefined>();
  const [lastEvent, setLastEvent] = useState("");
  const [rates, setRates] = useState<RateHistory>({});
  const status = detail.data?.status;
  const info = useSystemInfo(status === "running" ? 3000 : undefined);

  // Live progress while running; every event also refreshes the lineage counts (throttled).
  useEffect(() => {
    if (status !== "running") return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stop = followEvents(props.id, (event) => {
      setLastEvent(event.event);
      const routes = (event.data as { routes?: LiveCounters } | null)?.routes;
      if (routes !== undefined) {
        setLive(routes);
        if (event.event === "route_progress") setRates((h) => addProgress(h, Date.now(), routes));
      }
      timer ??= setTimeout(
        () => {
          timer = undefined;
          detail.reload();
        },
        event.event === "route_progress" ? 700 : 0,
      );
    });
    return () => {
      stop();
      clearTimeout(timer);
    };
  }, [props.id, status]);

  const snapshot = detail.data?.config_snapshot;
  const routeNames = snapshot === undefined ? Object.keys(detail.data?.routes ?? {}) : flowOrder(snapshot);
  const queueOf = (route: string) => snapshot?.routes[route]?.inbound.queue;
  const dlq = useLoad(
    async () => {
      const out: Record<string, number> = {};
      await Promise.all(
        routeNames.map(async (route) => {
          const queue = queueOf(route);
          if (queue === undefined) return;
          const stats = await api<QueueStats>(
            "GET",
            `/queues/stats${query({ destination: `/queue/${props.id}/${queue}` })}`,
          ).catch(() => undefined);
          if (stats !== undefined) out[route] = stats.dlq_depth;
        }),
      );
      return out;
    },
    [props.id, routeNames.join(","), status],
    status === "running" ? 3000 : undefined,
  );

  const record = detail.data;
  const counters = (route: string, name: string): number =>
    live?.[route]?.[name] ?? record?.counters[`${route}.${name}`] ?? 0;

  const graph = useMemo(() => {
    const nodes: GraphNode[] = [];
    const edges: GraphEdge[] = [];
    if (snapshot === undefined) return { nodes, edges };
    const queues = new Set<string>();
    for (const [name, route] of Object.entries(snapshot.routes)) {
      const msgs = record?.routes[name]?.messages ?? {};
      nodes.push({
        id: `route:${name}`,
        label: name,
        kind: "route",
        detail: `${msgs.completed ?? 0} done · ${msgs.failed ?? 0} failed · ${counters(name, "inFlight")} busy`,
      });
      queues.add(route.inbound.queue);
      edges.push({
        from: `queue:${route.inbound.queue}`,
        to: `route:${name}`,
        label: String(counters(name, "acknowledged")),
      });
      for (const out of route.outbound ?? []) {
        queues.add(out);
        edges.push({ from: `route:${name}`, to: `queue:${out}`, label: String(counters(name, "published")) });
      }
    }
    for (const q of queues) nodes.push({ id: `queue:${q}`, label: q, kind: "queue", detail: "queue" });
    return { nodes, edges };
  }, [snapshot, record, live]);

  const [replayRoute, setReplayRoute] = useState("");
  const [actionError, setActionError] = useState<Error | undefined>();
  async function replay() {
    setActionError(undefined);
    const from = replayRoute !== "" ? replayRoute : routeNames[0];
    try {
      const created = await api<{ id: string }>("POST", `${path}/replay`, { from_route: from });
      navigate(href("executions", created.id));
    } catch (e) {
      setActionError(e as Error);
    }
  }
  async function act(action: "cancel" | "resume") {
    setActionError(undefined);
    try {
      await api("POST", `${path}/${action}`, {});
      detail.reload();
      info.reload();
    } catch (e) {
      setActionError(e as Error);
    }
  }

  const heading = <PageTitle title={`Execution ${props.id}`} tabTitle={`Execution ${shortId(props.id)}`} />;
  if (record === undefined)
    return (
      <div>
        {heading}
        {detail.error === undefined ? <Loading what="the execution" /> : <ErrorBox error={detail.error} />}
      </div>
    );
  return (
    <div data-testid="execution-page" data-status={record.status}>
      {heading}
      <Section
        title="Facts"
        actions={
          <span>
            {record.status === "running" ? (
              <button type="button" data-testid="cancel" onClick={() => act("cancel")}>
                cancel
              </button>
            ) : null}{" "}
            {canResume(info.data, record.id, record.status) ? (
              <button
                type="button"
                data-testid="resume"
                title="continue an execution left running by a stopped server"
                onClick={() => act("resume")}
              >
                resume
              </button>
            ) : null}
          </span>
        }
      >
        <dl class="facts">
          <dt>status</dt>
          <dd data-testid="execution-status">
            <StatusBadge status={record.status} />{" "}
            {record.status === "running" && lastEvent !== "" ? (
              <span class="muted">live · last event {lastEvent}</span>
            ) : null}
          </dd>
          <dt>config</dt>
          <dd>
            {record.config_name}
            {record.config_version === null ? "" : ` v${record.config_version}`}
          </dd>
          <dt>started</dt>
          <dd>
            <Time iso={record.created_at} />
          </dd>
          <dt>completion moment</dt>
          <dd data-testid="completion-moment">
            {record.finished_at === null
              ? "not yet"
              : [
                  <Time key="t" iso={record.finished_at} />,
                  ` (after ${duration(record.created_at, record.finished_at)})`,
                ]}
          </dd>
          {record.parent_execution_id === null ? null : (
            <>
              <dt>replay of</dt>
              <dd>
                <a data-testid="parent-link" href={href("executions", record.parent_execution_id)}>
                  {record.parent_execution_id}
                </a>{" "}
                from route {record.replay_from_route}
              </dd>
            </>
          )}
          {record.error === null ? null : (
            <>
              <dt>error</dt>
              <dd class="error-text">{record.error}</dd>
            </>
          )}
          <dt>lineage</dt>
          <dd>
            <a href={href("executions", record.id, "lineage")}>every lineage row</a> ·{" "}
            <a href={hrefWith(["executions"], { parent: record.id })}>replays of this execution</a>
          </dd>
        </dl>
      </Section>
      <Section title="Routes">
        <table class="grid" data-testid="routes-table">
          <thead>
            <tr>
              <th>route</th>
              <th>messages</th>
              <th>completed</th>
              <th>failed</th>
              <th>retries</th>
              <th>dead letters</th>
              <th>in flight</th>
              <th>published</th>
              <th>rate (messages · failures per second)</th>
            </tr>
          </thead>
          <tbody>
            {routeNames.map((route) => {
              const msgs = record.routes[route]?.messages ?? {};
              const total = Object.values(msgs).reduce((a, b) => a + b, 0);
              const queue = queueOf(route);
              return (
                <tr key={route} data-route={route}>
                  <td>{route}</td>
                  <td class="num" data-col="messages">
                    {total}
                  </td>
                  <td class="num" data-col="completed">
                    {msgs.completed ?? 0}
                  </td>
                  <td class="num" data-col="failed">
                    {msgs.failed ?? 0}
                  </td>
                  <td class="num" data-col="retries">
                    {counters(route, "failed")}
                  </td>
                  <td class="num" data-col="dead-letters">
                    {queue === undefined ? (
                      "—"
                    ) : (
                      <a href={hrefWith(["dead-letters"], { destination: `/queue/${record.id}/${queue}` })}>
                        {dlq.data?.[route] ?? "…"}
                      </a>
                    )}
                  </td>
                  <td class="num" data-col="in-flight">
                    {counters(route, "inFlight")}
                  </td>
                  <td class="num" data-col="published">
                    {counters(route, "published")}
                  </td>
                  <td data-col="rate">
                    <RouteRate route={route} history={rates[route]} />
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
        <p class="muted">
          The rate column follows the live event stream while the execution runs and this page is open.
        </p>
      </Section>
      <Section title="Pipeline">
        <GraphView
          testId="pipeline-graph"
          label="the pipeline: routes and the queues between them"
          nodes={graph.nodes}
          edges={graph.edges}
          direction="auto"
        />
        <p class="muted">
          Edges into a route count acknowledged deliveries; edges out of it count published messages.
        </p>
      </Section>
      <ExecutionInput record={record} />
      <Section title="Replay">
        <div class="start">
          <label>
            from route{" "}
            <select
              data-testid="replay-route"
              value={replayRoute !== "" ? replayRoute : routeNames[0]}
              onChange={(e) => setReplayRoute((e.target as HTMLSelectElement).value)}
            >
              {routeNames.map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
          </label>
          <button
            type="button"
            data-testid="replay-button"
            disabled={record.status === "running"}
            onClick={replay}
          >
            replay from this route
          </button>
          {record.status === "running" ? <span class="muted">replay needs a finished execution</span> : null}
        </div>
        <ErrorBox error={actionError} />
      </Section>
    </div>
  );
}

/** Routes in the order messages flow: sources first (inbound fed by no route), then downstream. */
function flowOrder(snapshot: PipelineSnapshot): string[] {
  const routes = Object.entries(snapshot.routes);
  const produced = new Set(routes.flatMap(([, r]) => r.outbound ?? []));
  const order: string[] = [];
  const queue = routes.filter(([, r]) => !produced.has(r.inbound.queue)).map(([name]) => name);
  while (queue.length > 0) {
    const name = queue.shift() as string;
    if (order.includes(name)) continue;
    order.push(name);
    for (const out of snapshot.routes[name]?.outbound ?? [])
      for (const [next, r] of routes) if (r.inbound.queue === out) queue.push(next);
  }
  for (const [name] of routes) if (!order.includes(name)) order.push(name);
  return order;
}
