import { api, type DeadLetter } from "../api.ts";

/** An action on dead letters waiting for the operator's yes. */
export type Pending =
  | { kind: "discard"; letter: DeadLetter }
  | { kind: "redrive-all"; force: boolean }
  | { kind: "redrive-one"; letter: DeadLetter; force: boolean }
  | { kind: "redrive-selected"; ids: string[]; force: boolean }
  | { kind: "discard-selected"; ids: string[] };

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** The question asked before `action`, with the exact change in the count (`total` is fresh). */
export function question(action: Pending, destination: string, total: number): string {
  const forced =
    "force" in action && action.force
      ? " The execution is over: nothing will consume the queue unless you do."
      : "";
  switch (action.kind) {
    case "discard":
      return `Discard dead letter ${action.letter.message_id} for good? 1 of ${total} dead letters will be deleted; this cannot be undone.`;
    case "discard-selected":
      return `Discard the ${plural(action.ids.length, "selected dead letter")} for good? ${action.ids.length} of ${total} dead letters will be deleted; this cannot be undone.`;
    case "redrive-one":
      return `Move dead letter ${action.letter.message_id} back to ${destination} with a fresh attempt budget? ${total} → ${total - 1} dead letters.${forced}`;
    case "redrive-selected":
      return `Move the ${plural(action.ids.length, "selected dead letter")} back to ${destination} with a fresh attempt budget? ${total} → ${Math.max(0, total - action.ids.length)} dead letters.${forced}`;
    case "redrive-all":
      return `Move all ${total} dead letters back to ${destination} with a fresh attempt budget? ${total} → 0 dead letters.${forced}`;
  }
}

/** The message ids a refused redrive would replay instead. */
export function idsOf(action: Pending, page: readonly DeadLetter[]): string[] {
  if (action.kind === "redrive-one" || action.kind === "discard") return [action.letter.message_id];
  if (action.kind === "redrive-selected" || action.kind === "discard-selected") return action.ids;
  return page.map((l) => l.message_id);
}

/** Carries out `action`; answers what was done, in words. Throws the API's refusals. */
export async function perform(action: Pending, destination: string): Promise<string> {
  const missed = (missing: string[]) => (missing.length === 0 ? "" : ` (${missing.length} no longer there)`);
  switch (action.kind) {
    case "discard":
      await api("POST", "/queues/dlq/discard", { destination, message_id: action.letter.message_id });
      return `discarded ${action.letter.message_id}`;
    case "redrive-one":
      await api("POST", "/queues/dlq/redrive-one", {
        destination,
        message_id: action.letter.message_id,
        force: action.force,
      });
      return `redrove ${action.letter.message_id}`;
    case "redrive-all": {
      const result = await api<{ redriven: number }>("POST", "/queues/dlq/redrive", {
        destination,
        force: action.force,
      });
      return `redrove ${plural(result.redriven, "dead letter")}`;
    }
    case "redrive-selected": {
      const result = await api<{ redriven: string[]; missing: string[] }>(
        "POST",
        "/queues/dlq/redrive-many",
        {
          destination,
          message_ids: action.ids,
          force: action.force,
        },
      );
      return `redrove ${plural(result.redriven.length, "dead letter")}${missed(result.missing)}`;
    }
    case "discard-selected": {
      const result = await api<{ discarded: string[]; missing: string[] }>(
        "POST",
        "/queues/dlq/discard-many",
        {
          destination,
          message_ids: action.ids,
        },
      );
      return `discarded ${plural(result.discarded.length, "dead letter")}${missed(result.missing)}`;
    }
  }
}
