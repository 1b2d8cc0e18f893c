// Turns just started from this page, so a session page shows them at once even if its first
// read of the session raced the new turn.
import type { TurnCreated } from "./protocol";

const recent = new Map<string, string[]>();

export function rememberNewTurn(created: TurnCreated): void {
  const ids = recent.get(created.session_id) ?? [];
  if (!ids.includes(created.turn_id)) ids.push(created.turn_id);
  recent.set(created.session_id, ids);
}

export function newTurnsOf(sessionId: string): string[] {
  return recent.get(sessionId) ?? [];
}
