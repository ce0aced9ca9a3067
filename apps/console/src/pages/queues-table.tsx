import { useEffect, useRef, useState } from "preact/hooks";
import { api, type QueueStats, query } from "../api.ts";
import { ErrorBox, Pager, useLoad } from "../components/common.tsx";
import { appendSample, ratePerSecond, type Sample, Sparkline } from "../components/sparkline.tsx";
import { hrefWith } from "../router.ts";
import { PurgeQueue } from "./queue-purge.tsx";

const LIMIT = 20;
/** Statistics of the queues in view are re-read this often; each read is one sample. */
const POLL_MS = 5000;

interface Destination {
  destination: string;
  kind: "queue" | "topic";
  subscriptions?: string[];
}

interface History {
  depth: Sample[];
  dlq: Sample[];
}

function signed(rate: number): string {
  const text = Math.abs(rate) < 0.05 ? "0" : rate.toFixed(1);
  return rate > 0.05 ? `+${text}` : text;
}

/**
 * Queues the provider knows, with stats fetched only for the page in view: depth, consumers, in
 * flight and DLQ depth, each queue's depth over the last five minutes (sampled while the page is
 * open) with its net rate, and "purge…", which removes a queue's waiting messages after the operator
 * confirms (see `PurgeQueue`).
 */
export function QueuesTable() {
  const [offset, setOffset] = useState(0);
  const list = useLoad(() => api<{ provider: string; items: Destination[] }>("GET", "/queues"), [], POLL_MS);
  const items = (list.data?.items ?? []).slice().sort((a, b) => a.destination.localeCompare(b.destination));
  const visible = items.slice(offset, offset + LIMIT);
  const key = visible.map((d) => d.destination).join("|");
  const stats = useLoad(
    async () => {
      const out: Record<string, QueueStats> = {};
      await Promise.all(
        visible.map(async (d) => {
          const s = await api<QueueStats>(
            "GET",
            `/queues/stats${query({ destination: d.destination })}`,
          ).catch(() => undefined);
          if (s !== undefined) out[d.destination] = s;
        }),
      );
      return out;
    },
    [key],
    POLL_MS,
  );
  const history = useRef(new Map<string, History>());
  const [, setTick] = useState(0);
  useEffect(() => {
    if (stats.data === undefined) return;
    const now = Date.now();
    for (const [destination, s] of Object.entries(stats.data)) {
      const h = history.current.get(destination);
      history.current.set(destination, {
        depth: appendSample(h?.depth, now, s.depth),
        dlq: appendSample(h?.dlq, now, s.dlq_depth),
      });
    }
    setTick((n) => n + 1);
  }, [stats.data]);

  const [purging, setPurging] = useState<string | undefined>();
  const [outcome, setOutcome] = useState<string | undefined>();

  return (
    <div>
      <ErrorBox error={list.error} />
      {purging === undefined ? null : (
        <PurgeQueue
          key={purging}
          destination={purging}
          onClose={() => setPurging(undefined)}
          onDone={(text) => {
            setPurging(undefined);
            setOutcome(text);
            list.reload();
            stats.reload();
          }}
        />
      )}
      {outcome === undefined ? null : (
        <p class="ok" data-testid="purge-outcome">
          {outcome}
        </p>
      )}
      <table class="grid" data-testid="queues-table">
        <thead>
          <tr>
            <th>destination</th>
            <th>kind</th>
            <th>depth</th>
            <th>depth, last 5 min</th>
            <th>net rate /s</th>
            <th>consumers</th>
            <th>in flight</th>
            <th>DLQ depth</th>
            <th>actions</th>
          </tr>
        </thead>
        <tbody>
          {visible.map((d) => {
            const s = stats.data?.[d.destination];
            const h = history.current.get(d.destination);
            return (
              <tr key={d.destination} data-destination={d.destination}>
                <td>{d.destination}</td>
                <td>{d.kind}</td>
                <td class="num" data-col="depth">
                  {s?.depth ?? "…"}
                </td>
                <td>
                  {h === undefined ? null : (
                    <Sparkline
                      testId="queue-spark"
                      label={`depth of ${d.destination}: ${h.depth.map((p) => p.v).join(", ")}; dead letters ${h.dlq.at(-1)?.v ?? 0}`}
                      series={[
                        { name: "depth", samples: h.depth, className: "spark-a" },
                        { name: "dlq", samples: h.dlq, className: "spark-b" },
                      ]}
                    />
                  )}
                </td>
                <td class="num" data-col="rate">
                  {h === undefined ? "…" : signed(ratePerSecond(h.depth))}
                </td>
                <td class="num">{s?.consumers ?? "…"}</td>
                <td class="num">{s?.in_flight ?? "…"}</td>
                <td class="num">
                  <a href={hrefWith(["dead-letters"], { destination: d.destination })}>
                    {s?.dlq_depth ?? "…"}
                  </a>
                </td>
                <td class="actions">
                  {d.kind === "queue" ? (
                    <button
                      type="button"
                      data-testid="purge"
                      onClick={() => {
                        setOutcome(undefined);
                        setPurging(d.destination);
                      }}
                    >
                      purge…
                    </button>
                  ) : null}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {items.length === 0 && list.data !== undefined ? <p class="muted">no queues yet</p> : null}
      <Pager total={items.length} offset={offset} limit={LIMIT} onPage={setOffset} />
    </div>
  );
}
