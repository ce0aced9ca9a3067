import { useState } from "preact/hooks";
import { api, type ExecutionDetail } from "../api.ts";
import { ErrorBox, Section } from "../components/common.tsx";
import { Payload } from "../components/payload.tsx";

/**
 * The input an execution started with. The detail carries it up to 64 KB; a larger one is fetched
 * whole only when asked for (`GET /executions/{id}/input`).
 */
export function ExecutionInput(props: { record: ExecutionDetail }) {
  const r = props.record;
  const [whole, setWhole] = useState<{ input: unknown } | undefined>();
  const [error, setError] = useState<Error | undefined>();
  async function load() {
    setError(undefined);
    try {
      setWhole(await api<{ input: unknown }>("GET", `/executions/${encodeURIComponent(r.id)}/input`));
    } catch (e) {
      setError(e as Error);
    }
  }
  return (
    <Section title="Input" testId="execution-input">
      {r.input_omitted === undefined || whole !== undefined ? (
        <Payload
          value={whole === undefined ? r.input : whole.input}
          name={`input-${r.id}`}
          testId="input-payload"
        />
      ) : (
        <p>
          The input is {r.input_bytes.toLocaleString()} bytes, more than the page loads by itself.{" "}
          <button type="button" data-testid="load-input" onClick={load}>
            load it
          </button>
        </p>
      )}
      <ErrorBox error={error} />
    </Section>
  );
}
