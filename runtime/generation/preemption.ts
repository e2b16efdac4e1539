/**
 * Which batch sequences give their places up to a waiting interactive one.
 *
 * Issue 17 promises that interactive requests never queue behind batch work.
 * For text generation the admission queue's order is not enough: a batch
 * sequence admitted to a free place keeps it until it ends, possibly
 * hundreds of tokens later. So at a step boundary, when the interactive
 * request at the head of the queue has no room, the youngest batch sequences
 * (least work done, as vLLM's scheduler picks) leave the batch until it fits.
 * Never an interactive sequence: batch work never preempts interactive work,
 * and interactive sequences never preempt each other.
 *
 * A pure decision over the running rows; the decode scheduler does the moving.
 */
export interface RunningRow {
  /** From the batch lane: only these may be preempted. */
  batch: boolean;
  /** When it was first admitted: a larger number is younger. */
  admittedOrder: number;
  /** Cache positions it reserves (prompt plus output limit). */
  reserved: number;
}

export interface Room {
  /** Most rows decoded together. */
  maxRows: number;
  /** Whether rows reserving these many positions each fit the cache together. */
  fits(reservations: readonly number[]): boolean;
}

/** Whether a newcomer reserving `reserved` positions fits beside `rows`. */
export function hasRoom(rows: readonly RunningRow[], reserved: number, room: Room): boolean {
  if (rows.length === 0) return true;
  if (rows.length >= room.maxRows) return false;
  return room.fits([...rows.map((r) => r.reserved), reserved]);
}

/**
 * Indices of the rows to preempt so that an interactive newcomer reserving
 * `reserved` positions fits: none when it fits already, the fewest youngest
 * batch rows otherwise, or `null` when even every batch row leaving would
 * not make room (it then waits for interactive rows, and batch rows keep
 * running meanwhile rather than stop for nothing).
 */
export function preemptionVictims(
  rows: readonly RunningRow[],
  reserved: number,
  room: Room,
): number[] | null {
  const youngestBatchFirst = rows
    .map((row, index) => ({ row, index }))
    .filter(({ row }) => row.batch)
    .sort((a, b) => b.row.admittedOrder - a.row.admittedOrder)
    .map(({ index }) => index);
  const gone = new Set<number>();
  const remaining = () => rows.filter((_, i) => !gone.has(i));
  if (hasRoom(remaining(), reserved, room)) return [];
  for (const index of youngestBatchFirst) {
    gone.add(index);
    if (hasRoom(remaining(), reserved, room)) return [...gone];
  }
  return null;
}
