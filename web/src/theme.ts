import { createStore } from "./store";

/** The colour scheme: the system's (prefers-color-scheme) until the user picks one, then theirs. */
export type Theme = "light" | "dark";

const KEY = "deepsolve.theme";
const media = window.matchMedia("(prefers-color-scheme: dark)");

function storedTheme(): Theme | null {
  try {
    const value = localStorage.getItem(KEY);
    return value === "light" || value === "dark" ? value : null;
  } catch {
    return null;
  }
}

function systemTheme(): Theme {
  return media.matches ? "dark" : "light";
}

export const theme = createStore<Theme>(storedTheme() ?? systemTheme());

function apply(value: Theme) {
  document.documentElement.dataset.theme = value;
  document.documentElement.style.colorScheme = value;
}

apply(theme.get());
theme.subscribe(apply);
media.addEventListener("change", () => {
  if (storedTheme() === null) theme.set(systemTheme());
});

export function setTheme(value: Theme): void {
  try {
    localStorage.setItem(KEY, value);
  } catch {
    // Private mode: the choice lasts for this page only.
  }
  theme.set(value);
}
