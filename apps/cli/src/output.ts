/** Where a command writes; tests and the in-process runner pass their own. */
export interface Output {
  out(text: string): void;
  err(text: string): void;
  /** True when stdout is a terminal (progress is redrawn in place). */
  readonly isTty: boolean;
}

export const processOutput: Output = {
  out: (text) => process.stdout.write(text.endsWith("\n") ? text : `${text}\n`),
  err: (text) => process.stderr.write(text.endsWith("\n") ? text : `${text}\n`),
  get isTty() {
    return process.stdout.isTTY === true;
  },
};

/** Renders rows as an aligned text table. */
export function table(
  headers: readonly string[],
  rows: readonly (readonly (string | number | null | undefined)[])[],
): string {
  const cells = [
    headers,
    ...rows.map((r) => r.map((c) => (c === null || c === undefined ? "-" : String(c)))),
  ];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : (c ?? "").padEnd(widths[i] ?? 0)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}
