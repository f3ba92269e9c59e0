/**
 * Where the room reserved for the answer came from: compactor's configuration,
 * or the request's own ceiling (capped at a quarter of the window), so the
 * 400 names the number the client can change, and only one it sent.
 */
export interface AnswerReservation {
  readonly tokens: number;
  /** `reserve_output_tokens` (compactor's setting), or the request's own field that set it, in its API's words (its wire format's output-limit field). */
  readonly source: string;
  /** The number asked for (the request's, or `reserve_output_tokens`) before the quarter-of-the-window cap, when the cap applied. */
  readonly requested?: number;
}

/** compactor's own setting of the room kept for the answer. */
export const RESERVE_SETTING = 'reserve_output_tokens';

export function reservationText(reservation: AnswerReservation): string {
  const capped = reservation.requested === undefined ? '' : ` of ${reservation.requested}, capped at a quarter of the window`;
  return reservation.source === RESERVE_SETTING ? `${RESERVE_SETTING}${capped}` : `the request's ${reservation.source}${capped}`;
}

/** What to lower: the request's field when it set the reservation, else compactor's own setting. */
export function reservationAdvice(reservation: AnswerReservation): string {
  return reservation.source === RESERVE_SETTING ? `lower ${RESERVE_SETTING} in compactor's configuration` : `lower ${reservation.source}`;
}

