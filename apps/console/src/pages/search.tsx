import { useEffect } from "preact/hooks";
import { api, type Execution, query } from "../api.ts";
import { ErrorBox, Loading, Section, StatusBadge, useLoad } from "../components/common.tsx";
import { PageTitle } from "../components/page-title.tsx";
import { Time } from "../components/time.tsx";
import { shortId } from "../format.ts";
import { href, hrefWith, navigate, type Route } from "../router.ts";

interface MessageHit {
  execution_id: string;
  config_name: string;
  execution_status: string;
  created_at: string;
  message_id: string;
  status: string;
  attempt: number;
}

interface SearchAnswer {
  id: string;
  execution: Execution | null;
  messages: MessageHit[];
  replays: Execution[];
  scanned: number;
  executions_total: number;
  complete: boolean;
}

/** The most executions the server looks through for a message id in one search. */
const MAX_SCAN = 5000;

/** The search box of the navigation: any id an operator has at hand. */
export function SearchBox(props: { initial: string }) {
  return (
    <form
      class="search-box"
      aria-label="find by id"
      onSubmit={(e) => {
        e.preventDefault();
        const id = String(new FormData(e.currentTarget as HTMLFormElement).get("id") ?? "").trim();
        if (id !== "") navigate(hrefWith(["search"], { id }));
      }}
    >
      <input
        name="id"
        data-testid="search-input"
        aria-label="find an execution id, message id or correlation id"
        placeholder="execution, message or correlation id"
        value={props.initial}
      />
      <button type="submit" data-testid="search-button">
        find
      </button>
    </form>
  );
}

/**
 * What an id is: an execution, a message (in which executions), or a correlation id (the id of the
 * message that started a chain: its tree holds the chain, and replays of its execution carry it on).
 */
export function SearchPage(props: { route: Route }) {
  const id = props.route.params.get("id")?.trim() ?? "";
  const scan = Number(props.route.params.get("scan") ?? "") || undefined;
  const answer = useLoad(
    () =>
      id === "" ? Promise.resolve(undefined) : api<SearchAnswer>("GET", `/search${query({ id, scan })}`),
    [id, scan],
  );
  const a = answer.data;
  // Only an execution with that id and nothing else: go straight to it.
  useEffect(() => {
    if (a?.execution !== null && a?.execution !== undefined && a.messages.length === 0)
      location.replace(href("executions", a.execution.id));
  }, [a]);
  return (
    <div data-testid="search-page">
      <PageTitle
        title={id === "" ? "Find" : `Find ${id}`}
        tabTitle={id === "" ? "Find" : `Find ${shortId(id)}`}
      />
      {id === "" ? (
        <Section title="What to look for">
          <p>Type an execution id, a message id or a correlation id into the box at the top of every page.</p>
        </Section>
      ) : answer.error !== undefined ? (
        <ErrorBox error={answer.error} />
      ) : a === undefined ? (
        <Loading what="the answer" />
      ) : (
        <SearchResults answer={a} />
      )}
    </div>
  );
}

function SearchResults(props: { answer: SearchAnswer }) {
  const a = props.answer;
  const nothing = a.execution === null && a.messages.length === 0;
  return (
    <>
      {a.execution === null ? null : (
        <Section title="Execution" testId="found-execution">
          <p>
            <a href={href("executions", a.execution.id)}>{a.execution.id}</a>{" "}
            <StatusBadge status={a.execution.status} /> {a.execution.config_name}, started{" "}
            <Time iso={a.execution.created_at} />
          </p>
        </Section>
      )}
      <Section title="Messages" testId="found-messages">
        <p class="muted" data-testid="search-scope" data-complete={String(a.complete)}>
          Looked for a message with this id in the newest {a.scanned} of {a.executions_total} executions.
          {a.complete ? "" : " "}
          {a.complete ? null : (
            <a href={hrefWith(["search"], { id: a.id, scan: Math.min(a.executions_total, MAX_SCAN) })}>
              look through {Math.min(a.executions_total, MAX_SCAN)}
            </a>
          )}
        </p>
        {a.messages.length === 0 ? (
          <p data-testid="no-messages">{nothing ? "Nothing has this id." : "No message has this id."}</p>
        ) : (
          <table class="grid" data-testid="message-hits">
            <thead>
              <tr>
                <th>execution</th>
                <th>config</th>
                <th>started</th>
                <th>message status</th>
                <th>attempt</th>
                <th>lineage</th>
              </tr>
            </thead>
            <tbody>
              {a.messages.map((m) => (
                <tr key={m.execution_id} data-execution-id={m.execution_id}>
                  <td>
                    <a href={href("executions", m.execution_id)} title={m.execution_id}>
                      {shortId(m.execution_id)}
                    </a>{" "}
                    <StatusBadge status={m.execution_status} />
                  </td>
                  <td>{m.config_name}</td>
                  <td>
                    <Time iso={m.created_at} />
                  </td>
                  <td>
                    <StatusBadge status={m.status} />
                  </td>
                  <td class="num">{m.attempt}</td>
                  <td>
                    <a
                      data-testid="hit-tree"
                      href={href("executions", m.execution_id, "lineage", m.message_id)}
                    >
                      its tree
                    </a>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
      {a.replays.length === 0 ? null : (
        <Section
          title="Replays of those executions (they carry the same correlation ids)"
          testId="found-replays"
        >
          <ul>
            {a.replays.map((r) => (
              <li key={r.id}>
                <a href={href("executions", r.id)}>{r.id}</a> <StatusBadge status={r.status} /> from route{" "}
                {r.replay_from_route}
              </li>
            ))}
          </ul>
        </Section>
      )}
    </>
  );
}
