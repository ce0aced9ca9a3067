import { useState } from "preact/hooks";
import { ApiError, api, type DeadLetter, type ExecutionDetail, type Page, query } from "../api.ts";
import { ErrorBox, Pager, Section, useLoad } from "../components/common.tsx";
import { PageTitle } from "../components/page-title.tsx";
import { preview, shortId, when } from "../format.ts";
import { href, hrefWith, navigate, type Route } from "../router.ts";
import { QueuesTable } from "./queues-table.tsx";

const LIMIT = 20;
/** Bodies are shown up to this many characters of JSON. */
const BODY_CAP = 2048;

type Pending =
  | { kind: "discard"; letter: DeadLetter }
  | { kind: "redrive-all"; force: boolean }
  | { kind: "redrive-one"; letter: DeadLetter; force: boolean };

/** `/queue/<execution id>/<queue>` → its parts, for the replay suggestion. */
function scoped(destination: string): { executionId: string; queue: string } | undefined {
  const match = /^\/queue\/([0-9a-f-]{36})\/(.+)$/i.exec(destination);
  return match === null ? undefined : { executionId: match[1] as string, queue: match[2] as string };
}

/** Dead letters of one queue: browse, redrive one/all, discard, with confirmations and exact counts. */
export function DeadLettersPage(props: { route: Route }) {
  const destination = props.route.params.get("destination") ?? "";
  const offset = Number(props.route.params.get("offset") ?? "0") || 0;
  if (destination === "") {
    return (
      <div>
        <PageTitle title="Dead letters" />
        <Section title="Queues">
          <p class="muted">Pick a queue: the DLQ column links to its dead letters.</p>
          <QueuesTable />
        </Section>
      </div>
    );
  }
  return <DeadLetterBrowser destination={destination} offset={offset} />;
}

function DeadLetterBrowser(props: { destination: string; offset: number }) {
  const { destination, offset } = props;
  const page = useLoad(
    () => api<Page<DeadLetter>>("GET", `/queues/dlq${query({ destination, offset, limit: LIMIT })}`),
    [destination, offset],
  );
  const [pending, setPending] = useState<Pending | undefined>();
  const [outcome, setOutcome] = useState<string | undefined>();
  const [error, setError] = useState<Error | undefined>();
  const [refusal, setRefusal] = useState<
    { message: string; messageIds: string[]; action: Pending } | undefined
  >();
  const [openBody, setOpenBody] = useState<string | undefined>();
  const total = page.data?.total ?? 0;
  const target = scoped(destination);

  /** The queue's dead letters now: counts in outcomes come from the server, never the page's last read. */
  const countNow = () =>
    api<Page<DeadLetter>>("GET", `/queues/dlq${query({ destination, limit: 1 })}`).then((p) => p.total);

  /** Asks first; the page is re-read so the question carries the current count. */
  function ask(action: Pending) {
    setPending(action);
    page.reload();
  }

  async function confirm(action: Pending) {
    setPending(undefined);
    setError(undefined);
    setRefusal(undefined);
    try {
      const before = await countNow();
      let done: string;
      if (action.kind === "discard") {
        await api("POST", "/queues/dlq/discard", { destination, message_id: action.letter.message_id });
        done = `discarded ${action.letter.message_id}`;
      } else if (action.kind === "redrive-one") {
        await api("POST", "/queues/dlq/redrive-one", {
          destination,
          message_id: action.letter.message_id,
          force: action.force,
        });
        done = `redrove ${action.letter.message_id}`;
      } else {
        const result = await api<{ redriven: number }>("POST", "/queues/dlq/redrive", {
          destination,
          force: action.force,
        });
        done = `redrove ${result.redriven} dead letter${result.redriven === 1 ? "" : "s"}`;
      }
      setOutcome(`${done}; dead letters: ${before} → ${await countNow()}`);
    } catch (e) {
      if (e instanceof ApiError && e.code === "execution_not_running") {
        const ids =
          action.kind === "redrive-one"
            ? [action.letter.message_id]
            : (page.data?.items ?? []).map((l) => l.message_id);
        setRefusal({ message: e.message, messageIds: ids, action });
      } else setError(e as Error);
    }
    page.reload();
  }

  async function replayInstead(messageIds: string[]) {
    if (target === undefined) return;
    setError(undefined);
    try {
      const execution = await api<ExecutionDetail>("GET", `/executions/${target.executionId}?snapshot=true`);
      const routes = execution.config_snapshot?.routes ?? {};
      const from = Object.keys(routes).find((name) => routes[name]?.inbound.queue === target.queue);
      if (from === undefined)
        throw new Error(`no route of execution ${target.executionId} reads queue ${target.queue}`);
      const created = await api<{ id: string }>("POST", `/executions/${target.executionId}/replay`, {
        from_route: from,
        message_ids: messageIds,
      });
      navigate(href("executions", created.id));
    } catch (e) {
      setError(e as Error);
    }
  }

  return (
    <div>
      <PageTitle
        title={`Dead letters of ${destination}`}
        tabTitle={`Dead letters of ${destination.split("/").at(-1)}`}
      />
      <Section
        title="Dead letters"
        actions={
          <span>
            {target === undefined ? null : (
              <a href={href("executions", target.executionId)}>execution {shortId(target.executionId)}</a>
            )}{" "}
            <button
              type="button"
              data-testid="redrive-all"
              disabled={total === 0}
              onClick={() => ask({ kind: "redrive-all", force: false })}
            >
              redrive all ({total})
            </button>
          </span>
        }
      >
        <p data-testid="dlq-total" data-total={total}>
          {page.data === undefined ? "loading…" : `${total} dead letter${total === 1 ? "" : "s"}`}
        </p>
        {pending === undefined ? null : (
          <div class="confirm" data-testid="confirm">
            <p>
              {pending.kind === "discard"
                ? `Discard dead letter ${pending.letter.message_id} for good? 1 of ${total} dead letters will be deleted; this cannot be undone.`
                : pending.kind === "redrive-one"
                  ? `Move dead letter ${pending.letter.message_id} back to ${destination} with a fresh attempt budget? ${total} → ${total - 1} dead letters.`
                  : `Move all ${total} dead letters back to ${destination} with a fresh attempt budget? ${total} → 0 dead letters.`}
              {"force" in pending && pending.force
                ? " The execution is over: nothing will consume the queue unless you do."
                : ""}
            </p>
            <button type="button" data-testid="confirm-yes" onClick={() => confirm(pending)}>
              {pending.kind === "discard" ? "discard" : "redrive"}
            </button>{" "}
            <button type="button" onClick={() => setPending(undefined)}>
              keep as is
            </button>
          </div>
        )}
        {refusal === undefined ? null : (
          <div class="refusal" role="alert" data-testid="redrive-refused">
            <strong>Redrive refused (409 execution_not_running).</strong> {refusal.message}
            <div>
              {target === undefined ? null : (
                <button
                  type="button"
                  data-testid="replay-instead"
                  onClick={() => replayInstead(refusal.messageIds)}
                >
                  replay {refusal.messageIds.length} message{refusal.messageIds.length === 1 ? "" : "s"} as a
                  new execution
                </button>
              )}{" "}
              <button
                type="button"
                data-testid="redrive-force"
                onClick={() => {
                  setRefusal(undefined);
                  if (refusal.action.kind !== "discard") ask({ ...refusal.action, force: true });
                }}
              >
                redrive anyway (force)
              </button>
            </div>
          </div>
        )}
        {outcome === undefined ? null : (
          <p class="ok" data-testid="outcome">
            {outcome}
          </p>
        )}
        <ErrorBox error={page.error ?? error} />
        <table class="grid" data-testid="dlq-table">
          <thead>
            <tr>
              <th>message</th>
              <th>reason</th>
              <th>attempts</th>
              <th>last error</th>
              <th>dead-lettered</th>
              <th>actions</th>
            </tr>
          </thead>
          <tbody>
            {(page.data?.items ?? []).map((letter) => {
              const body = preview(letter.body, BODY_CAP);
              return [
                <tr key={letter.message_id} data-message-id={letter.message_id}>
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
                  <td>{when(letter.dead_lettered_at)}</td>
                  <td class="actions">
                    <button
                      type="button"
                      onClick={() =>
                        setOpenBody(openBody === letter.message_id ? undefined : letter.message_id)
                      }
                    >
                      body
                    </button>
                    <button
                      type="button"
                      data-testid="redrive-one"
                      onClick={() => ask({ kind: "redrive-one", letter, force: false })}
                    >
                      redrive
                    </button>
                    <button
                      type="button"
                      data-testid="discard"
                      onClick={() => ask({ kind: "discard", letter })}
                    >
                      discard
                    </button>
                  </td>
                </tr>,
                openBody === letter.message_id ? (
                  <tr key={`${letter.message_id}-body`}>
                    <td colSpan={6}>
                      <pre class="body">{body.text}</pre>
                      {body.cut ? (
                        <p class="muted">
                          showing {BODY_CAP} of {body.size} characters
                        </p>
                      ) : null}
                    </td>
                  </tr>
                ) : null,
              ];
            })}
          </tbody>
        </table>
        <Pager
          total={total}
          offset={offset}
          limit={LIMIT}
          onPage={(o) => navigate(hrefWith(["dead-letters"], { destination, offset: o }))}
        />
      </Section>
    </div>
  );
}
