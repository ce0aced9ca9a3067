import { useState } from "preact/hooks";
import { api } from "../api.ts";
import { ErrorBox, Section, useLoad } from "../components/common.tsx";
import { PageTitle } from "../components/page-title.tsx";
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
                  <th colSpan={2}>provider {counters.data.provider}</th>
                </tr>
                {Object.entries(counters.data.durability).map(([k, v]) => (
                  <tr key={k} data-counter={`durability.${k}`}>
                    <td>{k}</td>
                    <td class={`num ${k === "lost" && v > 0 ? "error-text" : ""}`}>{v}</td>
                  </tr>
                ))}
                <tr>
                  <th colSpan={2}>lineage writer</th>
                </tr>
                {Object.entries(counters.data.lineage).map(([k, v]) => (
                  <tr key={k} data-counter={`lineage.${k}`}>
                    <td>{k}</td>
                    <td class={`num ${k === "lost" && v > 0 ? "error-text" : ""}`}>{v}</td>
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
          <pre class="body" data-testid="diagnostic" data-ok={String(diagnostic.ok)}>
            {diagnostic.lines.join("\n")}
          </pre>
        )}
      </Section>
    </div>
  );
}
