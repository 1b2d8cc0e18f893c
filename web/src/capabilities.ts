// What the server offers (model, tools, limits, price) and the solve knobs in force, loaded
// once per sign-in and shared by the solve form, the footer and the settings page.
import { useEffect } from "preact/hooks";
import { api, ApiError } from "./api";
import type { CapabilitiesView, SettingsView } from "./protocol";
import { createStore, useStore, type Store } from "./store";

export type Loaded<T> =
  | { status: "idle" }
  | { status: "loading" }
  | { status: "ready"; value: T }
  | { status: "error"; error: ApiError };

export const capabilities = createStore<Loaded<CapabilitiesView>>({ status: "idle" });
export const settings = createStore<Loaded<SettingsView>>({ status: "idle" });

function toApiError(error: unknown): ApiError {
  return error instanceof ApiError ? error : new ApiError(0, "network", String(error));
}

async function load<T>(store: Store<Loaded<T>>, fetcher: () => Promise<T>) {
  store.set({ status: "loading" });
  try {
    store.set({ status: "ready", value: await fetcher() });
  } catch (error) {
    store.set({ status: "error", error: toApiError(error) });
  }
}

export function reloadCapabilities(): void {
  void load(capabilities, api.capabilities);
  void load(settings, api.settings);
}

function ensureLoaded(): void {
  if (capabilities.get().status === "idle") reloadCapabilities();
}

export function useCapabilities(): { caps: Loaded<CapabilitiesView>; settings: Loaded<SettingsView> } {
  useEffect(ensureLoaded, []);
  return { caps: useStore(capabilities), settings: useStore(settings) };
}

export function forgetCapabilities(): void {
  capabilities.set({ status: "idle" });
  settings.set({ status: "idle" });
}

export function valueOf<T>(loaded: Loaded<T>): T | null {
  return loaded.status === "ready" ? loaded.value : null;
}
