/** Most acknowledgements one SETTLE_ACKS call carries (a longer batch is split across calls). */
const MAX_BATCH = 500;

interface Waiting {
  readonly entryId: string;
  readonly resolve: (code: number) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Gathers the acknowledgements a subscription makes during one event-loop turn and sends them as one
 * script call (`SETTLE_ACKS`), instead of one script call per delivery. Each caller still gets the
 * code for its own entry, or the call's error (and retries as it would with a call of its own: the
 * script is idempotent per entry).
 */
export class AckBatcher {
  private waiting: Waiting[] = [];
  private scheduled = false;

  constructor(private readonly send: (entryIds: readonly string[]) => Promise<readonly number[]>) {}

  /** Resolves with the entry's SETTLE code once the batch it joined has run. */
  ack(entryId: string): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      this.waiting.push({ entryId, resolve, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    this.scheduled = false;
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, MAX_BATCH);
      this.send(batch.map((w) => w.entryId)).then(
        (codes) => {
          for (let i = 0; i < batch.length; i += 1) (batch[i] as Waiting).resolve(Number(codes[i] ?? -1));
        },
        (error: unknown) => {
          for (const waiting of batch) waiting.reject(error);
        },
      );
    }
  }
}
