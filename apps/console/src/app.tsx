import { useEffect, useState } from "preact/hooks";
import { ApiError, api, onUnauthorized, readToken, saveToken } from "./api.ts";
import { DeadLettersPage } from "./pages/dead-letters.tsx";
import { ExecutionPage } from "./pages/execution.tsx";
import { ExecutionsPage } from "./pages/executions.tsx";
import { LineageListPage, LineageTreePage } from "./pages/lineage.tsx";
import { LoginPage } from "./pages/login.tsx";
import { SystemPage } from "./pages/system.tsx";
import { href, type Route, useRoute } from "./router.ts";

interface SystemInfo {
  provider: string;
  settings: { api_token?: string; api_token_reads?: boolean };
}

type Access =
  | { state: "checking" }
  | { state: "open"; info?: SystemInfo }
  | { state: "login"; reason: string };

/** Works out whether the server wants a token: reads may need one; every change does when one is set. */
async function checkAccess(): Promise<Access> {
  try {
    const info = await api<SystemInfo>("GET", "/system/info");
    if (info.settings.api_token !== undefined && readToken() === undefined) {
      return {
        state: "login",
        reason: "This server has an API token: starting, cancelling and redriving need it.",
      };
    }
    return { state: "open", info };
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      return { state: "login", reason: "This server requires its API token for every request." };
    }
    return { state: "open" };
  }
}

export function App() {
  const route = useRoute();
  const [access, setAccess] = useState<Access>({ state: "checking" });
  const recheck = () => void checkAccess().then(setAccess);
  useEffect(() => {
    recheck();
    return onUnauthorized(() => {
      saveToken(undefined);
      setAccess({ state: "login", reason: "The server refused the request: sign in with its API token." });
    });
  }, []);

  const section = route.path[0] ?? "executions";
  return (
    <div class="shell">
      <nav>
        <strong>Factflow</strong>
        <a href={href("executions")} class={section === "executions" ? "active" : ""}>
          Executions
        </a>
        <a href={href("dead-letters")} class={section === "dead-letters" ? "active" : ""}>
          Dead letters
        </a>
        <a href={href("system")} class={section === "system" ? "active" : ""}>
          Queues &amp; system
        </a>
        <span class="spacer" />
        {access.state === "open" && access.info !== undefined ? (
          <span class="nav-note">provider {access.info.provider}</span>
        ) : null}
        {readToken() === undefined ? null : (
          <button
            type="button"
            data-testid="sign-out"
            onClick={() => {
              saveToken(undefined);
              recheck();
            }}
          >
            sign out
          </button>
        )}
      </nav>
      <main>
        {access.state === "checking" ? <p class="muted">connecting…</p> : null}
        {access.state === "login" ? <LoginPage reason={access.reason} onLogin={recheck} /> : null}
        {access.state === "open" ? <Page route={route} /> : null}
      </main>
    </div>
  );
}

function Page(props: { route: Route }) {
  const [section = "executions", id, sub, messageId] = props.route.path;
  if (section === "executions" && id !== undefined) {
    if (sub === "lineage" && messageId !== undefined)
      return <LineageTreePage executionId={id} messageId={messageId} />;
    if (sub === "lineage")
      return <LineageListPage key={props.route.params.toString()} executionId={id} route={props.route} />;
    return <ExecutionPage key={id} id={id} />;
  }
  if (section === "dead-letters") return <DeadLettersPage route={props.route} />;
  if (section === "system") return <SystemPage />;
  return <ExecutionsPage route={props.route} />;
}
