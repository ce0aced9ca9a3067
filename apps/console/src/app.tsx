import { useEffect, useState } from "preact/hooks";
import { ApiError, api, onUnauthorized, readToken, saveToken } from "./api.ts";
import { PageTitle } from "./components/page-title.tsx";
import { DeadLettersPage } from "./pages/dead-letters.tsx";
import { ExecutionPage } from "./pages/execution.tsx";
import { ExecutionsPage } from "./pages/executions.tsx";
import { LineageListPage, LineageTreePage } from "./pages/lineage.tsx";
import { LoginPage } from "./pages/login.tsx";
import { NotFoundPage } from "./pages/not-found.tsx";
import { SearchBox, SearchPage } from "./pages/search.tsx";
import { SystemPage } from "./pages/system.tsx";
import { href, type Route, useRoute } from "./router.ts";
import type { SystemInfo } from "./system-info.ts";

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
  const navLink = (target: string, label: string) => (
    <a
      href={href(target)}
      class={section === target ? "active" : ""}
      aria-current={section === target ? "page" : undefined}
    >
      {label}
    </a>
  );
  return (
    <div class="shell">
      {/* biome-ignore lint/a11y/useValidAnchor: a skip link is a link; the fragment is the router's, so the click moves focus itself. */}
      <a
        class="skip-link"
        href="#main"
        onClick={(e) => {
          // Routes live in the fragment: move focus instead of navigating to "#main".
          e.preventDefault();
          document.getElementById("main")?.focus();
        }}
      >
        Skip to content
      </a>
      <nav aria-label="sections">
        <strong>Factflow</strong>
        {navLink("executions", "Executions")}
        {navLink("dead-letters", "Dead letters")}
        {navLink("system", "Queues & system")}
        <span class="spacer" />
        {access.state === "open" ? (
          <SearchBox
            key={route.params.get("id") ?? ""}
            initial={section === "search" ? (route.params.get("id") ?? "") : ""}
          />
        ) : null}
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
      <main id="main" tabIndex={-1}>
        {access.state === "checking" ? <PageTitle title="Connecting…" /> : null}
        {access.state === "login" ? <LoginPage reason={access.reason} onLogin={recheck} /> : null}
        {access.state === "open" ? <Page route={route} /> : null}
      </main>
    </div>
  );
}

function Page(props: { route: Route }) {
  const [section = "executions", id, sub, messageId, ...rest] = props.route.path;
  if (section === "executions" && id === undefined) return <ExecutionsPage route={props.route} />;
  if (section === "executions" && id !== undefined && rest.length === 0) {
    if (sub === "lineage" && messageId !== undefined)
      return <LineageTreePage key={id} executionId={id} messageId={messageId} route={props.route} />;
    if (sub === "lineage")
      return <LineageListPage key={props.route.params.toString()} executionId={id} route={props.route} />;
    if (sub === undefined) return <ExecutionPage key={id} id={id} />;
  }
  if (section === "dead-letters" && id === undefined) return <DeadLettersPage route={props.route} />;
  if (section === "system" && id === undefined) return <SystemPage />;
  if (section === "search" && id === undefined) return <SearchPage route={props.route} />;
  return <NotFoundPage path={props.route.path} />;
}
