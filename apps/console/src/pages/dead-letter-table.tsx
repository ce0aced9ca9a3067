// biome-ignore-all lint/a11y/noNoninteractiveTabindex: scrolled text blocks take the keyboard so they can be scrolled without a mouse.
import { useState } from "preact/hooks";
import type { DeadLetter } from "../api.ts";
import { CopyButton, Payload } from "../components/payload.tsx";
import { Time } from "../components/time.tsx";
import { shortId } from "../format.ts";
import { href } from "../router.ts";
import type { Pending } from "./dead-letter-actions.ts";

/**
 * One page of dead letters: a checkbox each (and one for the page) for the bulk actions, the
 * per-letter actions, and on demand the letter's body, headers and last error, copyable.
 */
export function DeadLetterTable(props: {
  letters: readonly DeadLetter[];
  selected: ReadonlySet<string>;
  onSelect: (ids: ReadonlySet<string>) => void;
  ask: (action: Pending) => void;
}) {
  const [open, setOpen] = useState<string | undefined>();
  const ids = props.letters.map((l) => l.message_id);
  const all = ids.length > 0 && ids.every((id) => props.selected.has(id));
  const toggle = (id: string) => {
    const next = new Set(props.selected);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    props.onSelect(next);
  };
  return (
    <table class="grid" data-testid="dlq-table">
      <thead>
        <tr>
          <th>
            <input
              type="checkbox"
              data-testid="select-page"
              aria-label="select every dead letter on this page"
              checked={all}
              onChange={() => props.onSelect(all ? new Set() : new Set(ids))}
            />
          </th>
          <th>message</th>
          <th>reason</th>
          <th>attempts</th>
          <th>last error</th>
          <th>dead-lettered</th>
          <th>actions</th>
        </tr>
      </thead>
      <tbody>
        {props.letters.map((letter) => [
          <tr key={letter.message_id} data-message-id={letter.message_id}>
            <td>
              <input
                type="checkbox"
                data-testid="select-letter"
                aria-label={`select dead letter ${letter.message_id}`}
                checked={props.selected.has(letter.message_id)}
                onChange={() => toggle(letter.message_id)}
              />
            </td>
            <td>
              {letter.execution_id === null ? (
                shortId(letter.message_id)
              ) : (
                <a
                  href={href("executions", letter.execution_id, "lineage", letter.message_id)}
                  title="lineage of this message"
                >
                  {shortId(letter.message_id)}
                </a>
              )}
            </td>
            <td>{letter.reason}</td>
            <td class="num">{letter.attempts}</td>
            <td class="error-text">{letter.last_error ?? ""}</td>
            <td>
              <Time iso={letter.dead_lettered_at} />
            </td>
            <td class="actions">
              <button
                type="button"
                data-testid="open-letter"
                aria-expanded={open === letter.message_id}
                onClick={() => setOpen(open === letter.message_id ? undefined : letter.message_id)}
              >
                body
              </button>
              <button
                type="button"
                data-testid="redrive-one"
                onClick={() => props.ask({ kind: "redrive-one", letter, force: false })}
              >
                redrive
              </button>
              <button
                type="button"
                data-testid="discard"
                onClick={() => props.ask({ kind: "discard", letter })}
              >
                discard
              </button>
            </td>
          </tr>,
          open === letter.message_id ? (
            <tr key={`${letter.message_id}-body`} data-testid="letter-detail">
              <td colSpan={7}>
                <LetterDetail letter={letter} />
              </td>
            </tr>
          ) : null,
        ])}
      </tbody>
    </table>
  );
}

function LetterDetail(props: { letter: DeadLetter }) {
  const l = props.letter;
  return (
    <div class="letter-detail">
      <p>
        message {l.message_id} <CopyButton text={l.message_id} testId="copy-message-id" />
        {l.correlation_id === undefined ? null : (
          <>
            {" "}
            · correlation {l.correlation_id} <CopyButton text={l.correlation_id} />
          </>
        )}
      </p>
      {l.last_error === null ? null : (
        <>
          <h3>Last error</h3>
          <pre class="body error-text" tabIndex={0}>
            {l.last_error}
          </pre>
          <CopyButton text={l.last_error} />
        </>
      )}
      <h3>Body</h3>
      <Payload value={l.body} name={`dead-letter-${l.message_id}`} testId="letter-body" />
      <h3>Headers</h3>
      <Payload value={l.headers} name={`dead-letter-${l.message_id}-headers`} testId="letter-headers" />
    </div>
  );
}
