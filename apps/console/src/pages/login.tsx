import { useState } from "preact/hooks";
import { ApiError, api, saveToken } from "../api.ts";
import { ErrorBox, Section } from "../components/common.tsx";
import { PageTitle } from "../components/page-title.tsx";

/**
 * Asks for the server's API token and checks it with a request that changes nothing (validating an
 * empty config needs the token like every POST). The token stays in this tab's session storage.
 */
export function LoginPage(props: { onLogin: () => void; reason: string }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<Error | undefined>();
  async function submit(e: Event) {
    e.preventDefault();
    setError(undefined);
    saveToken(token.trim());
    try {
      await api("POST", "/configs/validate", { source: "name: token-check\nroutes: {}\n" });
      props.onLogin();
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) {
        saveToken(undefined);
        setError(new Error("that token was refused: use the server's FACTFLOW_API_TOKEN"));
      } else {
        props.onLogin();
      }
    }
  }
  return (
    <div>
      <PageTitle title="Sign in" />
      <Section title="API token">
        <p>{props.reason}</p>
        <form class="start" onSubmit={submit} data-testid="login-form">
          <label class="grow">
            API token{" "}
            <input
              type="password"
              autocomplete="off"
              data-testid="token-input"
              value={token}
              onInput={(e) => setToken((e.target as HTMLInputElement).value)}
            />
          </label>
          <button type="submit" data-testid="login-button">
            sign in
          </button>
        </form>
        <ErrorBox error={error} />
      </Section>
    </div>
  );
}
