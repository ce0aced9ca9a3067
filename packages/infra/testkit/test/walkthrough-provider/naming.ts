import { checkDestination, invalidInputError } from "@factflow/provider-kit";

export const NAME = "walkthrough";

/** The queue a destination (and, for a topic, a subscription) is consumed from. */
export function queueKey(destination: string, subscription?: string): string {
  const { kind } = checkDestination(NAME, destination);
  if (kind === "queue") return destination;
  if (subscription === undefined)
    throw invalidInputError(NAME, "invalid_argument", `${destination} is a topic: name the subscription`);
  return `${destination}#${subscription}`;
}
