// Seq-range arithmetic for transcript sync (PROTOCOL.md §11), the same rules as
// bridge/protocol/ranges.py: every helper normalizes first (drops inverted ranges, sorts, merges
// overlapping and adjacent ones), so results compose.

/** An inclusive [from, to] pair of transcript seqs. */
export type Range = [number, number];

export function normalize(ranges: Iterable<readonly [number, number]>): Range[] {
  const ordered: Range[] = [];
  for (const [low, high] of ranges) if (low <= high) ordered.push([low, high]);
  ordered.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const merged: Range[] = [];
  for (const [low, high] of ordered) {
    const last = merged[merged.length - 1];
    if (last !== undefined && low <= last[1] + 1) {
      if (high > last[1]) last[1] = high;
    } else {
      merged.push([low, high]);
    }
  }
  return merged;
}

export function union(...lists: Iterable<readonly [number, number]>[]): Range[] {
  const all: [number, number][] = [];
  for (const list of lists) for (const [a, b] of list) all.push([a, b]);
  return normalize(all);
}

export function subtract(
  ranges: Iterable<readonly [number, number]>,
  remove: Iterable<readonly [number, number]>,
): Range[] {
  const cuts = normalize(remove);
  const result: Range[] = [];
  let index = 0;
  for (const [low, high] of normalize(ranges)) {
    while (index < cuts.length && cuts[index]![1] < low) index++;
    let cursor = low;
    for (let scan = index; scan < cuts.length && cuts[scan]![0] <= high; scan++) {
      const [cutLow, cutHigh] = cuts[scan]!;
      if (cutLow > cursor) result.push([cursor, cutLow - 1]);
      cursor = Math.max(cursor, cutHigh + 1);
      if (cursor > high) break;
    }
    if (cursor <= high) result.push([cursor, high]);
  }
  return result;
}

/** The parts of [low, high] that `have` does not cover (empty when low > high). */
export function missing(have: Iterable<readonly [number, number]>, low: number, high: number): Range[] {
  return subtract([[low, high]], have);
}

export function size(ranges: Iterable<readonly [number, number]>): number {
  let total = 0;
  for (const [low, high] of normalize(ranges)) total += high - low + 1;
  return total;
}

export function covers(ranges: Iterable<readonly [number, number]>, target: number | readonly [number, number]): boolean {
  const [low, high] = typeof target === "number" ? [target, target] : target;
  if (low > high) return true;
  return normalize(ranges).some(([start, end]) => start <= low && high <= end);
}

/** Ranges of the sorted, distinct seqs given (what a transcript holds). */
export function fromSeqs(sortedSeqs: Iterable<number>): Range[] {
  const held: Range[] = [];
  for (const seq of sortedSeqs) {
    const last = held[held.length - 1];
    if (last !== undefined && seq === last[1] + 1) last[1] = seq;
    else if (last === undefined || seq > last[1]) held.push([seq, seq]);
  }
  return held;
}
