/**
 * Where the room reserved for the answer came from: compactor's configuration,
 * or the request's own ceiling (capped at a quarter of the window), so the
 * 400 names the number the client can change, and only one it sent.
 */
export interface AnswerReservation {
  readonly tokens: number;
  readonly source: 'reserve_output_tokens' | 'max_tokens' | 'max_completion_tokens' | 'max_output_tokens';
  /** The number asked for (the request's, or `reserve_output_tokens`) before the quarter-of-the-window cap, when the cap applied. */
  readonly requested?: number;
}

export function reservationText(reservation: AnswerReservation): string {
  const capped = reservation.requested === undefined ? '' : ` of ${reservation.requested}, capped at a quarter of the window`;
  return reservation.source === 'reserve_output_tokens' ? `reserve_output_tokens${capped}` : `the request's ${reservation.source}${capped}`;
}

/** What to lower: the request's field when it set the reservation, else compactor's own setting. */
export function reservationAdvice(reservation: AnswerReservation): string {
  return reservation.source === 'reserve_output_tokens' ? 'lower reserve_output_tokens in compactor\'s configuration' : `lower ${reservation.source}`;
}

