import type { JsonValue } from "@factflow/protocols";

export type ExecutionEventType = "started" | "route_progress" | "completed" | "failed" | "cancelled";

/** One event of an execution. `id` increases by one per event of that execution, from 1. */
export interface ExecutionEvent {
  readonly id: number;
  readonly executionId: string;
  readonly type: ExecutionEventType;
  /** ISO-8601. */
  readonly at: string;
  readonly data: { readonly [key: string]: JsonValue };
}

export const TERMINAL_EVENT_TYPES: ReadonlySet<ExecutionEventType> = new Set([
  "completed",
  "failed",
  "cancelled",
]);

export type ExecutionEventListener = (event: ExecutionEvent) => void;

interface Channel {
  nextId: number;
  readonly history: ExecutionEvent[];
  readonly listeners: Set<ExecutionEventListener>;
  ended: boolean;
}

export interface ExecutionEventHubOptions {
  /** Events kept per execution for replay (`afterId`). @default 1000 */
  readonly historyPerExecution?: number;
  /** Finished executions whose history is kept. @default 500 */
  readonly finishedExecutions?: number;
}

/**
 * Per-execution event channels with a bounded history, so an SSE client reconnecting with
 * Last-Event-ID gets what it missed. `route_progress` events are dropped from the history first
 * when it is full, so lifecycle events survive.
 */
export class ExecutionEventHub {
  readonly #channels = new Map<string, Channel>();
  readonly #finished: string[] = [];
  readonly #historyLimit: number;
  readonly #finishedLimit: number;

  constructor(options: ExecutionEventHubOptions = {}) {
    this.#historyLimit = options.historyPerExecution ?? 1000;
    this.#finishedLimit = options.finishedExecutions ?? 500;
  }

  has(executionId: string): boolean {
    return this.#channels.has(executionId);
  }

  emit(
    executionId: string,
    type: ExecutionEventType,
    data: ExecutionEvent["data"] = {},
  ): ExecutionEvent | undefined {
    const channel = this.#channel(executionId);
    if (channel.ended) return undefined;
    const event: ExecutionEvent = {
      id: channel.nextId++,
      executionId,
      type,
      at: new Date().toISOString(),
      data,
    };
    channel.history.push(event);
    if (channel.history.length > this.#historyLimit) {
      const progress = channel.history.findIndex((e) => e.type === "route_progress");
      channel.history.splice(Math.max(progress, 0), 1);
    }
    if (TERMINAL_EVENT_TYPES.has(type)) {
      channel.ended = true;
      this.#finished.push(executionId);
      while (this.#finished.length > this.#finishedLimit)
        this.#channels.delete(this.#finished.shift() as string);
    }
    for (const listener of [...channel.listeners]) {
      try {
        listener(event);
      } catch {
        // A failing listener (a closed SSE socket) must not stop the others.
      }
    }
    return event;
  }

  /**
   * Calls `listener` with every kept event after `afterId`, then with each new one. Returns the
   * unsubscribe function.
   */
  subscribe(executionId: string, listener: ExecutionEventListener, afterId = 0): () => void {
    const channel = this.#channel(executionId);
    for (const event of channel.history) if (event.id > afterId) listener(event);
    channel.listeners.add(listener);
    return () => channel.listeners.delete(listener);
  }

  /** Kept events after `afterId`. */
  history(executionId: string, afterId = 0): ExecutionEvent[] {
    return (this.#channels.get(executionId)?.history ?? []).filter((e) => e.id > afterId);
  }

  isEnded(executionId: string): boolean {
    return this.#channels.get(executionId)?.ended ?? false;
  }

  #channel(executionId: string): Channel {
    let channel = this.#channels.get(executionId);
    if (channel === undefined) {
      channel = { nextId: 1, history: [], listeners: new Set(), ended: false };
      this.#channels.set(executionId, channel);
    }
    return channel;
  }
}
