import { useState } from "preact/hooks";
import { ApiError, api, type DeadLetter, type ExecutionDetail, type Page, query } from "../api.ts";
import { ErrorBox, Pager, Section, useLoad } from "../components/common.tsx";
import { PageTitle } from "../components/page-title.tsx";
import { shortId } from "../format.ts";
import { href, hrefWith, navigate, type Route } from "../router.ts";
import { idsOf, type Pending, perform, question } from "./dead-letter-actions.ts";
import { DeadLetterTable } from "./dead-letter-table.tsx";
import { QueuesTable } from "./queues-table.tsx";

const LIMIT = 20;

/** `/queue/<execution id>/<queue>` → its parts, for the replay suggestion. */
function scoped(destination: string): { executionId: string; queue: string } | undefined {
  const match = /^\/queue\/([0-9a-f-]{36})\/(.+)$/i.exec(destination);
  return match === null ? undefined : { executionId: match[1] as string, queue: match[2] as string };
}

/** Dead letters of one queue: browse, redrive, discard (one, a selection, all), with exact counts. */
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
  return <DeadLetterBrowser key={`${destination}@${offset}`} destination={destination} offset={offset} />;
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
  const [selected, setSelected] = useState<ReadonlySet<string>>(new Set());
  const total = page.data?.total ?? 0;
  const target = scoped(destination);
  const chosen = [...selected];

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
      const done = await perform(action, destination);
      setOutcome(`${done}; dead letters: ${before} → ${await countNow()}`);
      setSelected(new Set());
    } catch (e) {
      if (e instanceof ApiError && e.code === "execution_not_running") {
        setRefusal({ message: e.message, messageIds: idsOf(action, page.data?.items ?? []), action });
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
        <div class="bulk" data-testid="bulk">
          <span class="muted">{chosen.length} selected</span>{" "}
          <button
            type="button"
            data-testid="redrive-selected"
            disabled={chosen.length === 0}
            onClick={() => ask({ kind: "redrive-selected", ids: chosen, force: false })}
          >
            redrive selected
          </button>{" "}
          <button
            type="button"
            data-testid="discard-selected"
            disabled={chosen.length === 0}
            onClick={() => ask({ kind: "discard-selected", ids: chosen })}
          >
            discard selected
          </button>
        </div>
        {pending === undefined ? null : (
          <div class="confirm" data-testid="confirm">
            <p>{question(pending, destination, total)}</p>
            <button type="button" data-testid="confirm-yes" onClick={() => confirm(pending)}>
              {pending.kind.startsWith("discard") ? "discard" : "redrive"}
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
                  const again = refusal.action;
                  if (again.kind !== "discard" && again.kind !== "discard-selected")
                    ask({ ...again, force: true });
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
        <DeadLetterTable
          letters={page.data?.items ?? []}
          selected={selected}
          onSelect={setSelected}
          ask={ask}
        />
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
