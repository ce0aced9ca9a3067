import type { LineageRow } from "../api.ts";
import { Section, StatusBadge } from "../components/common.tsx";
import { CopyButton, Payload, TextPayload } from "../components/payload.tsx";
import { Time } from "../components/time.tsx";
import { href, hrefWith } from "../router.ts";

/**
 * Everything lineage keeps about one row: ids (copyable), timing, input hash, output keys, the
 * error with its stack (when the adapter threw), and for a message row its body. Lineage records no
 * headers: a dead letter keeps its headers and last error.
 */
export function LineageRowDetail(props: { row: LineageRow; executionId: string; onClose: () => void }) {
  const r = props.row;
  return (
    <Section
      title={`${r.kind === "message" ? "Message" : "Adapter"} row ${r.id}`}
      testId="row-detail"
      actions={
        <button type="button" data-testid="close-detail" onClick={props.onClose}>
          close
        </button>
      }
    >
      <dl class="facts">
        <dt>message</dt>
        <dd>
          <a href={href("executions", props.executionId, "lineage", r.message_id)}>{r.message_id}</a>{" "}
          <CopyButton text={r.message_id} testId="copy-message-id" />
        </dd>
        <dt>correlation</dt>
        <dd>
          <a href={hrefWith(["search"], { id: r.correlation_id })}>{r.correlation_id}</a>{" "}
          <CopyButton text={r.correlation_id} />
        </dd>
        <dt>route · adapter</dt>
        <dd>
          {r.route}
          {r.adapter === null ? "" : ` · ${r.adapter}`}
        </dd>
        <dt>status</dt>
        <dd>
          <StatusBadge status={r.status} /> attempt {r.attempt}
        </dd>
        <dt>started · finished</dt>
        <dd>
          <Time iso={r.started_at} /> · <Time iso={r.finished_at} relative={false} />
        </dd>
        <dt>parent row</dt>
        <dd>{r.parent_id ?? "—"}</dd>
        <dt>input hash</dt>
        <dd class="mono">{r.input_hash ?? "—"}</dd>
        <dt>output keys</dt>
        <dd>{r.output_keys.length === 0 ? "—" : r.output_keys.join(", ")}</dd>
        {r.error === null ? null : (
          <>
            <dt>error</dt>
            <dd class="error-text" data-testid="row-error">
              {r.error.class}: {r.error.message}
              {r.error.retryable === undefined
                ? ""
                : ` (retryable: ${r.error.retryable}, fatal: ${r.error.fatal})`}{" "}
              <CopyButton text={`${r.error.class}: ${r.error.message}`} />
            </dd>
          </>
        )}
      </dl>
      {r.error?.stack === undefined ? null : (
        <>
          <h3>Stack</h3>
          <TextPayload text={r.error.stack} name={`stack-${r.id}`} testId="row-stack" />
        </>
      )}
      {r.kind === "message" ? (
        <>
          <h3>Body</h3>
          <Payload value={r.payload} name={`message-${r.message_id}`} testId="row-payload" />
        </>
      ) : (
        <p class="muted">
          Adapter rows keep no body: the message row of {r.message_id} holds what the adapter received.
        </p>
      )}
      <p class="muted">
        Lineage records no message headers; a dead letter keeps its headers and last error.
        {r.error !== null && r.error.stack === undefined
          ? " This error has no stack: the adapter reported it rather than throwing."
          : ""}
      </p>
    </Section>
  );
}
