/**
 * A double-ended queue over a growable ring buffer: O(1) push/shift/unshift and O(1) indexed reads,
 * which the ready lists, FIFO lanes and dead-letter pages all need on the hot path.
 */
export class Deque<T> {
  #items: (T | undefined)[] = new Array(16);
  #head = 0;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  push(item: T): void {
    if (this.#size === this.#items.length) this.#grow();
    this.#items[(this.#head + this.#size) & (this.#items.length - 1)] = item;
    this.#size++;
  }

  unshift(item: T): void {
    if (this.#size === this.#items.length) this.#grow();
    this.#head = (this.#head - 1) & (this.#items.length - 1);
    this.#items[this.#head] = item;
    this.#size++;
  }

  shift(): T | undefined {
    if (this.#size === 0) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head] = undefined;
    this.#head = (this.#head + 1) & (this.#items.length - 1);
    this.#size--;
    return item;
  }

  peek(): T | undefined {
    return this.#size === 0 ? undefined : this.#items[this.#head];
  }

  at(index: number): T | undefined {
    if (index < 0 || index >= this.#size) return undefined;
    return this.#items[(this.#head + index) & (this.#items.length - 1)];
  }

  /** Removes the first item matching `predicate` (O(n)); used only for admin and rare paths. */
  removeFirst(predicate: (item: T) => boolean): T | undefined {
    for (let i = 0; i < this.#size; i++) {
      const item = this.at(i) as T;
      if (predicate(item)) {
        const rest: T[] = [];
        for (let j = i + 1; j < this.#size; j++) rest.push(this.at(j) as T);
        const keep = i;
        while (this.#size > keep) this.#pop();
        for (const r of rest) this.push(r);
        return item;
      }
    }
    return undefined;
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (let i = 0; i < this.#size; i++) yield this.at(i) as T;
  }

  clear(): void {
    this.#items = new Array(16);
    this.#head = 0;
    this.#size = 0;
  }

  #pop(): void {
    const index = (this.#head + this.#size - 1) & (this.#items.length - 1);
    this.#items[index] = undefined;
    this.#size--;
  }

  #grow(): void {
    const next: (T | undefined)[] = new Array(this.#items.length * 2);
    for (let i = 0; i < this.#size; i++) next[i] = this.#items[(this.#head + i) & (this.#items.length - 1)];
    this.#items = next;
    this.#head = 0;
  }
}
