import type { ComponentChildren } from "preact";
import { useEffect } from "preact/hooks";

/**
 * The page's one `h1`, and the browser tab's title to match (`Executions · Factflow`), so tabs,
 * history and screen readers tell pages apart.
 */
export function PageTitle(props: { title: string; tabTitle?: string; children?: ComponentChildren }) {
  const tab = props.tabTitle ?? props.title;
  useEffect(() => {
    document.title = `${tab} · Factflow`;
  }, [tab]);
  return (
    <div class="page-title">
      <h1>{props.title}</h1>
      {props.children}
    </div>
  );
}
