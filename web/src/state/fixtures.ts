// The recorded event logs (web/scripts/record-fixtures.sh), by name, for the tests.
import type { TurnEvent } from "../protocol";

const files = import.meta.glob<TurnEvent[]>("./fixtures/*.json", { eager: true, import: "default" });

export const FIXTURES: Record<string, TurnEvent[]> = Object.fromEntries(
  Object.entries(files).map(([path, events]) => [path.replace(/^.*\/(.*)\.json$/, "$1"), events]),
);

export function fixture(name: string): TurnEvent[] {
  const events = FIXTURES[name];
  if (!events) throw new Error(`no fixture named ${name} (have: ${Object.keys(FIXTURES).join(", ")})`);
  return events;
}
