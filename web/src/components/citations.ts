// The turn's numbered sources, for Markdown outside the answer (step summaries) that cites them.
import { createContext } from "preact";
import type { Citations } from "../render/markdown";

export const CitationsContext = createContext<Citations | undefined>(undefined);
