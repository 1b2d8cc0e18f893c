// The shell: language, theme, who is signed in, and which page the address names.
import { useEffect, useMemo, useRef } from "preact/hooks";
import { auth, goToLogin, loadAuth, needsLogin } from "./auth";
import { Header } from "./components/Header";
import { ErrorMessage } from "./components/ErrorMessage";
import { I18n, lang, translator, useI18n } from "./i18n";
import { EvalRunPage, EvalsPage, TurnRedirectPage } from "./pages/Evals";
import { HistoryPage } from "./pages/History";
import { KnowledgeBasePage, KnowledgePage } from "./pages/Knowledge";
import { LoginPage } from "./pages/Login";
import { MissingPage } from "./pages/Missing";
import { SessionPage } from "./pages/Session";
import { SettingsPage } from "./pages/Settings";
import { SolvePage } from "./pages/Solve";
import { navigate, usePath, useRoute, type Route } from "./router";
import { useStore } from "./store";

export function App() {
  const current = useStore(lang);
  const i18n = useMemo(() => ({ lang: current, t: translator(current) }), [current]);
  return (
    <I18n.Provider value={i18n}>
      <Shell />
    </I18n.Provider>
  );
}

function Shell() {
  const { t } = useI18n();
  const state = useStore(auth);
  const route = useRoute();

  useEffect(() => {
    void loadAuth();
  }, []);

  useFocusOnNavigation();

  useEffect(() => {
    if (needsLogin(state) && route.page !== "login") goToLogin();
    const loginNotNeeded = state.status === "ready" && !needsLogin(state);
    if (loginNotNeeded && route.page === "login") navigate("/", { replace: true });
  }, [state, route.page]);

  return (
    <>
      <a class="skip-link" href="#main">
        {t("common.skip")}
      </a>
      <Header />
      <main id="main" class="main" tabIndex={-1}>
        {state.status === "loading" && <p class="muted">{t("common.loading")}</p>}
        {state.status === "error" && (
          <ErrorMessage error={state.error} onRetry={() => void loadAuth()} />
        )}
        {state.status === "ready" && <Page route={needsLogin(state) ? { page: "login" } : route} />}
      </main>
    </>
  );
}

/** After an in-app navigation, focus goes to the new page (as a page load would put it there). */
function useFocusOnNavigation() {
  const path = usePath();
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    const main = document.getElementById("main");
    // A page that placed focus itself (the sign-in field) keeps it.
    if (main && !main.contains(document.activeElement)) main.focus({ preventScroll: true });
  }, [path]);
}

function Page(props: { route: Route }) {
  const { route } = props;
  switch (route.page) {
    case "solve":
      return <SolvePage />;
    case "session":
      return <SessionPage key={route.id} id={route.id} />;
    case "history":
      return <HistoryPage />;
    case "settings":
      return <SettingsPage />;
    case "knowledge":
      return <KnowledgePage />;
    case "kb":
      return <KnowledgeBasePage key={route.id} id={route.id} />;
    case "evals":
      return <EvalsPage />;
    case "eval":
      return <EvalRunPage key={route.id} id={route.id} />;
    case "turn":
      return <TurnRedirectPage key={route.id} id={route.id} />;
    case "login":
      return <LoginPage />;
    case "missing":
      return <MissingPage />;
  }
}
