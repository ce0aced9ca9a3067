import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "../api.ts";

/** Loads data, reloads on `deps` change or when `reload()` is called; optional polling. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[], pollMs?: number) {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<Error | undefined>(undefined);
  const generation = useRef(0);
  const reload = useCallback(() => {
    const mine = ++generation.current;
    load().then(
      (value) => {
        if (mine !== generation.current) return;
        setData(value);
        setError(undefined);
      },
      (e: Error) => {
        if (mine === generation.current) setError(e);
      },
    );
  }, deps);
  useEffect(() => {
    reload();
    if (pollMs === undefined) return;
    const timer = setInterval(reload, pollMs);
    return () => clearInterval(timer);
  }, [reload, pollMs]);
  return { data, error, reload, setData };
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

export function Section(props: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section class="card">
      <header>
        <h2>{props.title}</h2>
        {props.actions}
      </header>
      {props.children}
    </section>
  );
}
