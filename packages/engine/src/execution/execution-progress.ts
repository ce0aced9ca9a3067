import type { RouteCounters } from "../delivery/route-processor.js";

/** What one route of a running execution is doing right now, in this process. */
export interface RouteActivity {
  readonly route: string;
  /** The route's inbound queue (logical name, not scoped). */
  readonly queue: string;
  /** Deliveries handled here: waiting for a slot, running adapters, or publishing their outputs. */
  readonly inFlight: number;
  /** Of `inFlight`: waiting for the execution's or the route's slot, or below the fan-out watermark. */
  readonly waitingForSlot: number;
  /** Of `inFlight`: registering their outputs in lineage or waiting for the broker to confirm them. */
  readonly publishing: number;
  /** Outputs registered or sent and not yet confirmed by the broker. */
  readonly outputsPending: number;
  /** Deliveries parked in a stateful adapter's batch (not counted in `inFlight`). */
  readonly held: number;
  /** The route does not consume (`concurrency: 0`). */
  readonly paused: boolean;
  /** The route's counters since the execution started here. */
  readonly counters: RouteCounters;
}

/**
 * When a running execution last did something, and what its routes are doing: the cheap, in-memory
 * part of a stall diagnosis (no lineage or broker read).
 */
export interface ExecutionProgress {
  readonly executionId: string;
  /** `starting` until every route is subscribed and the seed is published. */
  readonly phase: "starting" | "running";
  /** When a delivery last started, settled, parked, or an output was published (ISO 8601). */
  readonly lastProgressAt: string;
  /** Milliseconds since then (sampled about once a second, and on every call). */
  readonly quietMs: number;
  /** Seed messages (init, replay inputs, re-published rows) the broker has not confirmed yet. */
  readonly seedPending: number;
  readonly routes: readonly RouteActivity[];
}
