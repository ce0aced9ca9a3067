/** Short, readable figures for tables. */

export function when(iso: string | null): string {
  if (iso === null) return "—";
  const d = new Date(iso);
  return `${d.toLocaleDateString()} ${d.toLocaleTimeString()}`;
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

/** JSON for display, cut at `maxChars` so a large body cannot freeze the page. */
export function preview(value: unknown, maxChars = 4096): { text: string; cut: boolean; size: number } {
  const full = JSON.stringify(value, null, 2) ?? "null";
  return { text: full.slice(0, maxChars), cut: full.length > maxChars, size: full.length };
}
