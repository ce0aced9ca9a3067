import { appendSample, type Sample, Sparkline } from "../components/sparkline.tsx";

/** Counters of one route as `route_progress` events carry them (cumulative). */
type RouteCounters = Record<string, number>;

/** Per route, cumulative handled and failed counts at each progress event. */
export type RateHistory = Record<string, { handled: Sample[]; failed: Sample[] }>;

/** How many progress events (one every 500 ms by default) the charts keep: about two minutes. */
const KEEP = 240;

/** Adds one `route_progress` event's counters, taken at `t`. */
export function addProgress(
  history: RateHistory,
  t: number,
  routes: Record<string, RouteCounters>,
): RateHistory {
  const next: RateHistory = { ...history };
  for (const [route, c] of Object.entries(routes)) {
    const h = history[route];
    next[route] = {
      handled: appendSample(h?.handled, t, c.acknowledged ?? 0, KEEP),
      failed: appendSample(h?.failed, t, (c.failed ?? 0) + (c.rejected ?? 0), KEEP),
    };
  }
  return next;
}

/** Per-second rates between consecutive samples of a cumulative series. */
export function perSecond(series: readonly Sample[]): Sample[] {
  const out: Sample[] = [];
  for (let i = 1; i < series.length; i++) {
    const a = series[i - 1] as Sample;
    const b = series[i] as Sample;
    const seconds = (b.t - a.t) / 1000;
    if (seconds > 0) out.push({ t: b.t, v: Math.max(0, (b.v - a.v) / seconds) });
  }
  return out;
}

/** The latest rate, averaged over the last few samples so one quiet tick does not read as zero. */
function recent(series: readonly Sample[], span = 4): number {
  const tail = series.slice(-span);
  return tail.length === 0 ? 0 : tail.reduce((a, s) => a + s.v, 0) / tail.length;
}

/** One route's messages per second and failures per second over the time the page watched it. */
export function RouteRate(props: { route: string; history: RateHistory[string] | undefined }) {
  if (props.history === undefined || props.history.handled.length < 2) return <span class="muted">—</span>;
  const handled = perSecond(props.history.handled);
  const failed = perSecond(props.history.failed);
  const now = recent(handled);
  const failing = recent(failed);
  return (
    <span class="rate" data-testid="route-rate" data-rate={now.toFixed(2)} data-failures={failing.toFixed(2)}>
      <Sparkline
        label={`${props.route}: ${now.toFixed(1)} messages per second, ${failing.toFixed(1)} failures per second`}
        series={[
          { name: "handled", samples: handled, className: "spark-a" },
          { name: "failed", samples: failed, className: "spark-b" },
        ]}
      />{" "}
      {now.toFixed(1)}/s{failing > 0 ? <span class="error-text"> · {failing.toFixed(1)} fail/s</span> : null}
    </span>
  );
}
