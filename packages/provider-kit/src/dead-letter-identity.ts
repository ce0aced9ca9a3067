/**
 * The identity of a dead letter: its message id and the publish it descends from (its publish
 * time, `x-published-at`, which retry copies, redeliveries, dead-letter copies and redrives all
 * keep). Pass the stored copy's envelope, or its id and publish time as read from its headers.
 *
 * Two stored copies with one identity are one dead letter stored twice: a dead-letter copy sent
 * again after its confirmation was lost, or an original that came back after such a loss and was
 * dead-lettered again. The admin layer reports such a pair once and removes the later copy. A
 * message published again under the same id (a new publish time) is another dead letter. A
 * redrive moves the dead letter out before its copy can fail again, so a message redriven and
 * dead-lettered again is again one dead letter, with the new failure.
 */
export function deadLetterKey(message: {
  readonly id: string;
  readonly publishedAt?: string | undefined;
}): string {
  return JSON.stringify([message.id, message.publishedAt ?? null]);
}

/** The stored copies of a dead-letter destination, split by {@link distinctDeadLetters}. */
export interface DistinctDeadLetters<T> {
  /** One copy per dead letter: the first stored, in stored order. */
  readonly letters: readonly T[];
  /** Every later copy of a dead letter already in `letters`: to be removed, never reported. */
  readonly surplus: readonly T[];
}

/**
 * Splits `copies` (a dead-letter destination's stored copies, oldest first) into the dead letters
 * it holds (the first copy of each identity, `keyOf`, normally {@link deadLetterKey}) and the
 * surplus copies. Counts, browses, redrives and discards of the admin API work on `letters`, so
 * each dead letter is counted, listed and redriven once however many times it was stored.
 */
export function distinctDeadLetters<T>(
  copies: Iterable<T>,
  keyOf: (copy: T) => string,
): DistinctDeadLetters<T> {
  const seen = new Set<string>();
  const letters: T[] = [];
  const surplus: T[] = [];
  for (const copy of copies) {
    const key = keyOf(copy);
    if (seen.has(key)) surplus.push(copy);
    else {
      seen.add(key);
      letters.push(copy);
    }
  }
  return { letters, surplus };
}
