// biome-ignore-all lint/a11y/noNoninteractiveTabindex: scrolled text blocks take the keyboard so they can be scrolled without a mouse.
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "../api.ts";
import { ErrorBox, Section, useLoad } from "../components/common.tsx";
import { PageTitle } from "../components/page-title.tsx";
import { appendSample, ratePerSecond, type Sample, Sparkline } from "../components/sparkline.tsx";
import { QueuesTable } from "./queues-table.tsx";

interface Counters {
  provider: string;
  durability: Record<string, number>;
  lineage: Record<string, number>;
}

interface Readiness {
  status: string;
  checks?: Record<string, string>;
  problems?: unknown[];
}

interface Diagnostic {
  ok: boolean;
  provider: string;
  lines: string[];
}

/** `/readyz` answers 503 with a body when not ready: read it either way (no token: it is open). */
async function readiness(): Promise<Readiness & { http: number }> {
  const response = await fetch("/readyz", { headers: { accept: "application/json" } });
  return { ...((await response.json()) as Readiness), http: response.status };
}

/** Queues and system: depths, consumers, DLQ depths, durability counters, readiness, mq-diagnostic. */
export function SystemPage() {
  const ready = useLoad(readiness, [], 5000);
  const counters = useLoad(() => api<Counters>("GET", "/queues/counters"), [], 5000);
  const history = useRef(new Map<string, Sample[]>());
  const [, setTick] = useState(0);
  useEffect(() => {
    if (counters.data === undefined) return;
    const now = Date.now();
    const all = {
      ...Object.fromEntries(Object.entries(counters.data.durability).map(([k, v]) => [`durability.${k}`, v])),
      ...Object.fromEntries(Object.entries(counters.data.lineage).map(([k, v]) => [`lineage.${k}`, v])),
    };
    for (const [k, v] of Object.entries(all))
      history.current.set(k, appendSample(history.current.get(k), now, v));
    setTick((n) => n + 1);
  }, [counters.data]);
  const rateCell = (key: string) => {
    const samples = history.current.get(key);
    if (samples === undefined || samples.length < 2) return <td class="rate-cell muted">…</td>;
    const rate = ratePerSecond(samples.slice(-2));
    return (
      <td class="rate-cell" data-rate={rate.toFixed(2)}>
        <Sparkline
          label={`${key}: ${rate.toFixed(1)} per second`}
          width={80}
          height={20}
          series={[{ name: key, samples, className: "spark-a" }]}
        />{" "}
        {rate.toFixed(1)}/s
      </td>
    );
  };
  const [diagnostic, setDiagnostic] = useState<Diagnostic | undefined>();
  const [running, setRunning] = useState(false);
  const [error, setError] = useState<Error | undefined>();

  async function runDiagnostic() {
    setRunning(true);
    setError(undefined);
    try {
      setDiagnostic(await api<Diagnostic>("POST", "/system/mq-diagnostic", {}));
    } catch (e) {
      // A failed probe answers 503 with the same body: show its lines, not just the status.
      const body = (e as { body?: Diagnostic }).body;
      if (body?.lines !== undefined) setDiagnostic(body);
      else setError(e as Error);
    } finally {
      setRunning(false);
    }
  }

  const lost = (counters.data?.durability.lost ?? 0) + (counters.data?.lineage.lost ?? 0);
  return (
    <div>
      <PageTitle title="Queues & system" />
      <Section title="Readiness">
        <ErrorBox error={ready.error} />
        {ready.data === undefined ? null : (
          <p data-testid="readyz" data-status={ready.data.status}>
            <span class={`badge ${ready.data.status === "ready" ? "completed" : "failed"}`}>
              {ready.data.status}
            </span>{" "}
            (HTTP {ready.data.http}){" "}
            {Object.entries(ready.data.checks ?? {}).map(([k, v]) => (
              <span key={k} class="muted">
                {" "}
                · {k}: {v}
              </span>
            ))}
          </p>
        )}
      </Section>
      <Section title="Durability counters (since the server started)">
        <ErrorBox error={counters.error} />
        {counters.data === undefined ? null : (
          <div class="counters" data-testid="counters">
            <table class="grid">
              <tbody>
                <tr>
                  <th>provider {counters.data.provider}</th>
                  <th>total</th>
                  <th>per second, last 5 min</th>
                </tr>
                {Object.entries(counters.data.durability).map(([k, v]) => (
                  <tr key={k} data-counter={`durability.${k}`}>
                    <td>{k}</td>
                    <td class={`num ${k === "lost" && v > 0 ? "error-text" : ""}`}>{v}</td>
                    {rateCell(`durability.${k}`)}
                  </tr>
                ))}
                <tr>
                  <th colSpan={3}>lineage writer</th>
                </tr>
                {Object.entries(counters.data.lineage).map(([k, v]) => (
                  <tr key={k} data-counter={`lineage.${k}`}>
                    <td>{k}</td>
                    <td class={`num ${k === "lost" && v > 0 ? "error-text" : ""}`}>{v}</td>
                    {rateCell(`lineage.${k}`)}
                  </tr>
                ))}
              </tbody>
            </table>
            <p class={lost === 0 ? "ok" : "error-text"}>
              {lost === 0 ? "nothing lost" : `${lost} lost: see docs/operations.md`}
            </p>
          </div>
        )}
      </Section>
      <Section title="Queues">
        <QueuesTable />
      </Section>
      <Section
        title="MQ diagnostic"
        actions={
          <button type="button" data-testid="run-diagnostic" disabled={running} onClick={runDiagnostic}>
            {running ? "running…" : "run"}
          </button>
        }
      >
        <p class="muted">
          Publishes one probe to a scratch copy of every route queue of every config and waits for it.
        </p>
        <ErrorBox error={error} />
        {diagnostic === undefined ? null : (
          <pre class="body" tabIndex={0} data-testid="diagnostic" data-ok={String(diagnostic.ok)}>
            {diagnostic.lines.join("\n")}
          </pre>
        )}
      </Section>
    </div>
  );
}
