/** Short, readable figures for tables. */

const TIME = new Intl.DateTimeFormat(undefined, {
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  timeZoneName: "short",
});
const DATE_TIME = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  timeZoneName: "short",
});

/** Local time with its zone ("18:22:19 GMT+1"); the date too unless it is today. */
export function absoluteTime(iso: string, now = Date.now()): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toDateString() === new Date(now).toDateString() ? TIME.format(d) : DATE_TIME.format(d);
}

const RELATIVE = new Intl.RelativeTimeFormat(undefined, { numeric: "auto", style: "short" });
const STEPS: [Intl.RelativeTimeFormatUnit, number][] = [
  ["second", 60],
  ["minute", 60],
  ["hour", 24],
  ["day", 30],
  ["month", 12],
  ["year", Number.POSITIVE_INFINITY],
];

/** How long ago (or from now) a moment is: "12 sec. ago", "3 hr. ago". */
export function relativeTime(iso: string, now = Date.now()): string {
  let value = (Date.parse(iso) - now) / 1000;
  if (!Number.isFinite(value)) return "";
  for (const [unit, size] of STEPS) {
    if (Math.abs(value) < size) return RELATIVE.format(Math.round(value), unit);
    value /= size;
  }
  return "";
}

export function duration(from: string, to: string | null, now = Date.now()): string {
  const ms = (to === null ? now : Date.parse(to)) - Date.parse(from);
  if (!Number.isFinite(ms) || ms < 0) return "—";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 60) return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export function shortId(id: string): string {
  return id.length > 13 ? `${id.slice(0, 8)}…${id.slice(-4)}` : id;
}

/** Sums `<route>.<counter>` entries of an execution's counters by counter name. */
export function counterTotals(counters: Record<string, number>): Record<string, number> {
  const totals: Record<string, number> = {};
  for (const [key, value] of Object.entries(counters)) {
    const name = key.slice(key.lastIndexOf(".") + 1);
    totals[name] = (totals[name] ?? 0) + value;
  }
  return totals;
}
