import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "../api.ts";

/**
 * Loads data, reloads on `deps` change or when `reload()` is called; optional polling. Data and
 * errors belong to the `deps` they were loaded for: after a change they read undefined (and
 * `loading` true) until the new answer arrives, so a page never shows the previous subject's data
 * under its new heading.
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[], pollMs?: number) {
  const key = deps.map(String).join("\u0000");
  const [state, setState] = useState<{ key: string; data?: T; error?: Error }>({ key: "\u0001" });
  const generation = useRef(0);
  const reload = useCallback(() => {
    const mine = ++generation.current;
    load().then(
      (value) => {
        if (mine === generation.current) setState({ key, data: value });
      },
      (e: Error) => {
        if (mine === generation.current) setState((s) => ({ ...(s.key === key ? s : { key }), error: e }));
      },
    );
  }, deps);
  useEffect(() => {
    reload();
    if (pollMs === undefined) return;
    const timer = setInterval(reload, pollMs);
    return () => clearInterval(timer);
  }, [reload, pollMs]);
  const current = state.key === key;
  return {
    data: current ? state.data : undefined,
    error: current ? state.error : undefined,
    loading: !current || (state.data === undefined && state.error === undefined),
    reload,
  };
}

export function ErrorBox(props: { error: Error | undefined }) {
  if (props.error === undefined) return null;
  const code = props.error instanceof ApiError ? `${props.error.status} ${props.error.code}: ` : "";
  return (
    <div class="error" role="alert" data-testid="error">
      {code}
      {props.error.message}
    </div>
  );
}

export function Pager(props: {
  total: number;
  offset: number;
  limit: number;
  onPage: (offset: number) => void;
}) {
  const page = Math.floor(props.offset / props.limit) + 1;
  const pages = Math.max(1, Math.ceil(props.total / props.limit));
  return (
    <div class="pager" data-testid="pager">
      <button
        type="button"
        disabled={props.offset === 0}
        onClick={() => props.onPage(Math.max(0, props.offset - props.limit))}
      >
        ← previous
      </button>
      <span>
        page {page} of {pages} · {props.total} in all
      </span>
      <button
        type="button"
        disabled={props.offset + props.limit >= props.total}
        onClick={() => props.onPage(props.offset + props.limit)}
      >
        next →
      </button>
    </div>
  );
}

export function StatusBadge(props: { status: string }) {
  return <span class={`badge ${props.status}`}>{props.status}</span>;
}

export function Section(props: {
  title: string;
  children: ComponentChildren;
  actions?: ComponentChildren;
  testId?: string;
}) {
  return (
    <section class="card" data-testid={props.testId}>
      <header>
        <h2>{props.title}</h2>
        {props.actions}
      </header>
      {props.children}
    </section>
  );
}

/** A quiet placeholder while a page's data is on its way. */
export function Loading(props: { what: string }) {
  return (
    <p class="muted" data-testid="loading" role="status">
      loading {props.what}…
    </p>
  );
}
