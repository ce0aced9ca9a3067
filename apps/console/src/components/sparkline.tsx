/** A point of a series: when (ms since the epoch) and the value then. */
export interface Sample {
  t: number;
  v: number;
}

/** Keeps the last `max` samples of a series, appending `v` at `t`. */
export function appendSample(
  series: readonly Sample[] | undefined,
  t: number,
  v: number,
  max = 60,
): Sample[] {
  const next = [...(series ?? []), { t, v }];
  return next.length > max ? next.slice(next.length - max) : next;
}

/** Change per second between the first and the last sample (0 with fewer than two). */
export function ratePerSecond(series: readonly Sample[] | undefined): number {
  if (series === undefined || series.length < 2) return 0;
  const first = series[0] as Sample;
  const last = series[series.length - 1] as Sample;
  const seconds = (last.t - first.t) / 1000;
  return seconds > 0 ? (last.v - first.v) / seconds : 0;
}

/**
 * A small line of one or more series over the same time axis, scaled to the largest value; each
 * series gets its CSS class (`spark-a`, `spark-b`...). `label` says in words what it shows.
 */
export function Sparkline(props: {
  series: { name: string; samples: readonly Sample[]; className: string }[];
  label: string;
  width?: number;
  height?: number;
  testId?: string;
}) {
  const width = props.width ?? 120;
  const height = props.height ?? 28;
  const all = props.series.flatMap((s) => s.samples);
  const t0 = Math.min(...all.map((s) => s.t));
  const t1 = Math.max(...all.map((s) => s.t));
  const top = Math.max(1, ...all.map((s) => s.v));
  const x = (t: number) => (t1 === t0 ? width : ((t - t0) / (t1 - t0)) * (width - 2) + 1);
  const y = (v: number) => height - 1 - (v / top) * (height - 2);
  return (
    <svg
      class="sparkline"
      width={width}
      height={height}
      role="img"
      aria-label={props.label}
      data-testid={props.testId}
      data-points={all.length}
    >
      <title>{props.label}</title>
      {props.series.map((s) => (
        <polyline
          key={s.name}
          class={s.className}
          points={s.samples.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ")}
        />
      ))}
    </svg>
  );
}
