import { useState } from "preact/hooks";
import { api, type QueueStats, query } from "../api.ts";
import { ErrorBox, Pager, useLoad } from "../components/common.tsx";
import { hrefWith } from "../router.ts";

const LIMIT = 20;

interface Destination {
  destination: string;
  kind: "queue" | "topic";
  subscriptions?: string[];
}

/** Queues the provider knows, with stats fetched only for the page in view. */
export function QueuesTable() {
  const [offset, setOffset] = useState(0);
  const list = useLoad(() => api<{ provider: string; items: Destination[] }>("GET", "/queues"), [], 5000);
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
    5000,
  );
  return (
    <div>
      <ErrorBox error={list.error} />
      <table class="grid" data-testid="queues-table">
        <thead>
          <tr>
            <th>destination</th>
            <th>kind</th>
            <th>depth</th>
            <th>consumers</th>
            <th>in flight</th>
            <th>DLQ depth</th>
          </tr>
        </thead>
        <tbody>
          {visible.map((d) => {
            const s = stats.data?.[d.destination];
            return (
              <tr key={d.destination} data-destination={d.destination}>
                <td>{d.destination}</td>
                <td>{d.kind}</td>
                <td class="num">{s?.depth ?? "…"}</td>
                <td class="num">{s?.consumers ?? "…"}</td>
                <td class="num">{s?.in_flight ?? "…"}</td>
                <td class="num">
                  <a href={hrefWith(["dead-letters"], { destination: d.destination })}>
                    {s?.dlq_depth ?? "…"}
                  </a>
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
