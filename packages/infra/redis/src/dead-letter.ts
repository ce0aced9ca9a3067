import type { JsonValue, MessageEnvelope } from "@factflow/protocols";
import { envelopeFromHeaders } from "@factflow/provider-kit";

/** The envelope of a stored dead letter, rebuilt from its headers; `entryId` stands in for a missing id. */
export function envelopeOfDeadLetter(
  headers: Record<string, string>,
  body: JsonValue,
  entryId: string,
): MessageEnvelope {
  return envelopeFromHeaders({ ...headers }, body, { id: entryId }).envelope;
}
