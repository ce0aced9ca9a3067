import type { Output } from "./output.js";
import { table } from "./output.js";

/** Counters of one route as the engine reports them in `route_progress` events. */
export interface RouteProgress {
  acknowledged?: number;
  failed?: number;
  rejected?: number;
  abandoned?: number;
  published?: number;
  inFlight?: number;
  held?: number;
}

const HEADERS = ["route", "done", "failed", "rejected", "in flight", "published"];

function rows(routes: Record<string, RouteProgress>) {
  return Object.entries(routes).map(([route, c]) => [
    route,
    c.acknowledged ?? 0,
    c.failed ?? 0,
    c.rejected ?? 0,
    (c.inFlight ?? 0) + (c.held ?? 0),
    c.published ?? 0,
  ]);
}

/**
 * Live per-route progress. On a terminal the table is redrawn in place; otherwise a plain line is
 * printed for each route whose counters changed, at most once per `plainIntervalMs`.
 */
export class ProgressDisplay {
  private drawnLines = 0;
  private lastPlain = 0;
  private readonly printed = new Map<string, string>();
  private pending: Record<string, RouteProgress> | undefined;

  constructor(
    private readonly output: Output,
    private readonly routeOrder: readonly string[],
    private readonly plainIntervalMs = 1000,
  ) {}

  private ordered(routes: Record<string, RouteProgress>): Record<string, RouteProgress> {
    const out: Record<string, RouteProgress> = {};
    for (const name of this.routeOrder) out[name] = routes[name] ?? {};
    for (const [name, value] of Object.entries(routes)) if (!(name in out)) out[name] = value;
    return out;
  }

  update(routes: Record<string, RouteProgress>): void {
    const ordered = this.ordered(routes);
    if (this.output.isTty) {
      const text = table(HEADERS, rows(ordered));
      const up = this.drawnLines > 0 ? `\x1b[${this.drawnLines}A\r\x1b[J` : "";
      this.output.out(`${up}${text}`);
      this.drawnLines = text.split("\n").length;
      return;
    }
    this.pending = ordered;
    if (Date.now() - this.lastPlain >= this.plainIntervalMs) this.flushPlain();
  }

  /** Prints what a rate-limited plain update held back. */
  finish(): void {
    if (!this.output.isTty) this.flushPlain();
  }

  private flushPlain(): void {
    if (this.pending === undefined) return;
    this.lastPlain = Date.now();
    for (const [route, c] of Object.entries(this.pending)) {
      const line = `progress ${route}: done=${c.acknowledged ?? 0} failed=${c.failed ?? 0} rejected=${c.rejected ?? 0} in_flight=${(c.inFlight ?? 0) + (c.held ?? 0)} published=${c.published ?? 0}`;
      if (this.printed.get(route) === line) continue;
      this.printed.set(route, line);
      this.output.out(line);
    }
    this.pending = undefined;
  }
}
