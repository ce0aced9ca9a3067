import { CopyButton } from "../components/payload.tsx";
import { href, hrefWith, navigate } from "../router.ts";

/** The most rows one tree answer holds: the server's `?limit=` refuses more (as does the CLI's `--limit`). */
const MAX_TREE_ROWS = 20_000;

/** The `limit` a tree page's URL asks for: a whole number from 1 to {@link MAX_TREE_ROWS}, else the server's default. */
export function treeLimit(params: URLSearchParams): number | undefined {
  const text = params.get("limit");
  if (text === null || !/^\d+$/.test(text)) return undefined;
  const limit = Number(text);
  return limit >= 1 && limit <= MAX_TREE_ROWS ? limit : undefined;
}

/**
 * What a cut tree says: how many rows it shows and, below the maximum, a link that asks the server
 * for {@link MAX_TREE_ROWS}; at the maximum, where the rest of the rows are (the execution's rows page
 * by page, a descendant's own tree) and the same tree from the CLI and the API.
 */
export function TreeTruncatedNotice(props: {
  executionId: string;
  messageId: string;
  rows: number;
  limit: number;
}) {
  const rowsPage = (
    <a href={href("executions", props.executionId, "lineage")}>
      browse every row of the execution page by page
    </a>
  );
  if (props.limit < MAX_TREE_ROWS)
    return (
      <p data-testid="tree-truncated" data-limit={props.limit}>
        Showing the first {props.rows} rows of this tree (the server's limit here is {props.limit}): its
        ancestors, then descendants level by level; the server left the rest out.{" "}
        <button
          type="button"
          data-testid="tree-more"
          onClick={() =>
            navigate(
              hrefWith(["executions", props.executionId, "lineage", props.messageId], {
                limit: MAX_TREE_ROWS,
              }),
            )
          }
        >
          Show up to {MAX_TREE_ROWS.toLocaleString("en")} rows
        </button>{" "}
        or {rowsPage}.
      </p>
    );
  const cli = `factflow lineage ${props.executionId} --message ${props.messageId} --limit ${MAX_TREE_ROWS}`;
  const api = `GET /api/v1/executions/${props.executionId}/lineage/${props.messageId}?limit=${MAX_TREE_ROWS}`;
  return (
    <div data-testid="tree-truncated" data-limit={props.limit}>
      <p data-testid="tree-max">
        Showing the first {props.rows} rows of this tree: {MAX_TREE_ROWS.toLocaleString("en")} is the most one
        tree holds, here as in the CLI and the API, which answer the same rows. The rest are in the
        execution's rows ({rowsPage}, or the list API with <code>offset</code>), and in the trees of this
        message's descendants, opened from their links.
      </p>
      <p class="muted">
        <code data-testid="tree-cli">{cli}</code>{" "}
        <CopyButton text={cli} label="copy command" testId="copy-cli" />
        <br />
        <code>{api}</code>
      </p>
    </div>
  );
}
