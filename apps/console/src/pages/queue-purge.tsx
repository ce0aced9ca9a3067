import { useEffect, useState } from "preact/hooks";
import { ApiError, api, query } from "../api.ts";
import { ErrorBox } from "../components/common.tsx";

interface Counts {
  depth: number;
  dlq_depth: number;
  in_flight: number;
}

interface PurgeAnswer {
  purged: number;
  reason: string | null;
}

/**
 * Asks before purging one queue, with its counts read again when it asks, then purges it in place
 * (`POST /queues/purge`): the waiting messages go; the queue, its consumers, its messages in flight
 * and its dead letters stay. A queue of a running execution is refused (409) with the server's
 * reason, and "purge anyway" sends `force`.
 */
export function PurgeQueue(props: {
  destination: string;
  onClose: () => void;
  onDone: (outcome: string) => void;
}) {
  const { destination } = props;
  const [counts, setCounts] = useState<Counts | undefined>();
  const [error, setError] = useState<Error | undefined>();
  const [refused, setRefused] = useState<ApiError | undefined>();
  useEffect(() => {
    api<Counts>("GET", `/queues/stats${query({ destination })}`).then(setCounts, setError);
  }, [destination]);

  async function purge(force: boolean) {
    setError(undefined);
    try {
      const result = await api<PurgeAnswer>("POST", "/queues/purge", { destination, force });
      const after = await api<Counts>("GET", `/queues/stats${query({ destination })}`).catch(() => undefined);
      props.onDone(
        result.reason === null
          ? `purged ${result.purged} message${result.purged === 1 ? "" : "s"} from ${destination}` +
              (after === undefined
                ? ""
                : `; ${after.depth} waiting now, ${after.dlq_depth} dead letters kept`)
          : `${destination} was not purged: ${result.reason}`,
      );
    } catch (e) {
      if (e instanceof ApiError && e.status === 409 && !force) setRefused(e);
      else setError(e as Error);
    }
  }

  if (refused !== undefined) {
    return (
      <div class="refusal" role="alert" data-testid="purge-refused">
        <p>{refused.message}</p>
        <button type="button" data-testid="purge-force" onClick={() => purge(true)}>
          purge anyway
        </button>{" "}
        <button type="button" onClick={props.onClose}>
          keep as is
        </button>
      </div>
    );
  }
  return (
    <div class="confirm" data-testid="confirm-purge">
      <p>
        Purge {destination}?{" "}
        {counts === undefined
          ? "Reading its counts…"
          : `${counts.depth} → 0 waiting messages: the ${counts.depth} waiting are deleted for good; the queue, its consumers, the ${counts.in_flight} in flight and its ${counts.dlq_depth} dead letters stay.`}
      </p>
      <ErrorBox error={error} />
      <button
        type="button"
        data-testid="confirm-purge-yes"
        disabled={counts === undefined}
        onClick={() => purge(false)}
      >
        purge
      </button>{" "}
      <button type="button" onClick={props.onClose}>
        keep as is
      </button>
    </div>
  );
}
