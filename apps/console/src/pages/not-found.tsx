import { Section } from "../components/common.tsx";
import { PageTitle } from "../components/page-title.tsx";
import { href } from "../router.ts";

/** Any route the console does not know: say so, instead of showing another page under its URL. */
export function NotFoundPage(props: { path: string[] }) {
  const shown = `#/${props.path.join("/")}`;
  return (
    <div data-testid="not-found">
      <PageTitle title="Page not found" />
      <Section title="Nothing here">
        <p>
          The console has no page at <code>{shown}</code>. Its pages are{" "}
          <a href={href("executions")}>executions</a> (and each execution, its lineage and the lineage of a
          message), <a href={href("dead-letters")}>dead letters</a> and{" "}
          <a href={href("system")}>queues &amp; system</a>.
        </p>
      </Section>
    </div>
  );
}
