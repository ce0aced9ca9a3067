/**
 * The provider's own timer: one Node timer for the earliest due task, a binary min-heap for the rest.
 * Retries, delayed publishes and FIFO lanes waiting on a retry all go through it, so thousands of
 * scheduled messages cost one timer, not thousands.
 */
interface Task {
  due: number;
  order: number;
  run: () => void;
}

export class Scheduler {
  #heap: Task[] = [];
  #order = 0;
  #timer: NodeJS.Timeout | undefined;
  #timerDue = Number.POSITIVE_INFINITY;
  #keepAlive = false;
  #stopped = false;

  get size(): number {
    return this.#heap.length;
  }

  /** Runs `run` at or after `due` (epoch ms). */
  at(due: number, run: () => void): void {
    if (this.#stopped) return;
    this.#push({ due, order: this.#order++, run });
    if (due < this.#timerDue) this.#arm();
  }

  /**
   * Whether a pending timer keeps the process alive. It should while someone consumes: a retry due in
   * two seconds is work the process still has to do; with no consumer, nothing waits for it.
   */
  setKeepAlive(keepAlive: boolean): void {
    this.#keepAlive = keepAlive;
    if (this.#timer !== undefined) {
      if (keepAlive) this.#timer.ref();
      else this.#timer.unref();
    }
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#heap = [];
  }

  #arm(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    const top = this.#heap[0];
    if (top === undefined) {
      this.#timer = undefined;
      this.#timerDue = Number.POSITIVE_INFINITY;
      return;
    }
    this.#timerDue = top.due;
    this.#timer = setTimeout(() => this.#fire(), Math.max(0, top.due - Date.now()));
    if (!this.#keepAlive) this.#timer.unref();
  }

  #fire(): void {
    this.#timer = undefined;
    this.#timerDue = Number.POSITIVE_INFINITY;
    const now = Date.now();
    while (!this.#stopped) {
      const top = this.#heap[0];
      if (top === undefined || top.due > now) break;
      this.#popTop();
      top.run();
    }
    if (!this.#stopped) this.#arm();
  }

  #less(a: Task, b: Task): boolean {
    return a.due < b.due || (a.due === b.due && a.order < b.order);
  }

  #push(task: Task): void {
    const heap = this.#heap;
    heap.push(task);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(heap[i] as Task, heap[parent] as Task)) break;
      [heap[i], heap[parent]] = [heap[parent] as Task, heap[i] as Task];
      i = parent;
    }
  }

  #popTop(): void {
    const heap = this.#heap;
    const last = heap.pop() as Task;
    if (heap.length === 0) return;
    heap[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let smallest = i;
      if (l < heap.length && this.#less(heap[l] as Task, heap[smallest] as Task)) smallest = l;
      if (r < heap.length && this.#less(heap[r] as Task, heap[smallest] as Task)) smallest = r;
      if (smallest === i) break;
      [heap[i], heap[smallest]] = [heap[smallest] as Task, heap[i] as Task];
      i = smallest;
    }
  }
}
