import { useEffect, useState } from "preact/hooks";
import { absoluteTime, relativeTime } from "../format.ts";

/** The current time, re-read every `everyMs`, so relative times ("3 min ago") move on by themselves. */
export function useNow(everyMs = 15_000): number {
  const [now, setNow] = useState(Date.now);
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(timer);
  }, [everyMs]);
  return now;
}

/**
 * A moment as the reader's local time with its zone, and how long ago it was; the exact UTC instant
 * is in the tooltip and the `datetime` attribute.
 */
export function Time(props: { iso: string | null; relative?: boolean }) {
  const now = useNow();
  if (props.iso === null) return <span class="muted">—</span>;
  return (
    <time dateTime={props.iso} title={new Date(props.iso).toISOString()}>
      {absoluteTime(props.iso, now)}
      {props.relative === false ? null : <span class="muted"> · {relativeTime(props.iso, now)}</span>}
    </time>
  );
}
