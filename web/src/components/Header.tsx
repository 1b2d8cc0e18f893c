import { auth, signOut } from "../auth";
import { lang as langStore, setLang, useI18n, type Lang, type Key } from "../i18n";
import { usePath } from "../router";
import { useStore } from "../store";
import { setTheme, theme } from "../theme";
import { Link } from "./Link";

const NAV: { href: string; key: Key }[] = [
  { href: "/", key: "nav.solve" },
  { href: "/history", key: "nav.history" },
  { href: "/knowledge", key: "nav.knowledge" },
  { href: "/evals", key: "nav.evals" },
  { href: "/settings", key: "nav.settings" },
];

function isCurrent(path: string, href: string): boolean {
  if (href === "/") return path === "/" || path.startsWith("/sessions/");
  if (href === "/knowledge") return path === href || path.startsWith("/knowledge/");
  if (href === "/evals") return path === href || path.startsWith("/evals/");
  return path === href;
}

export function Header() {
  const { t } = useI18n();
  const path = usePath();
  const state = useStore(auth);
  const user = state.status === "ready" && state.session.mode === "tokens" ? state.session.user : null;
  const showNav = !(state.status === "ready" && state.session.mode === "tokens" && !user);

  return (
    <header class="site-header">
      <div class="site-header-inner">
        <Link href="/" class="brand">
          <span class="brand-mark" aria-hidden="true">
            ∂
          </span>
          <span class="brand-name">{t("app.name")}</span>
        </Link>
        {showNav && (
          <nav class="site-nav" aria-label={t("nav.label")}>
            {NAV.map((item) => (
              <Link key={item.href} href={item.href} current={isCurrent(path, item.href)}>
                {t(item.key)}
              </Link>
            ))}
          </nav>
        )}
        <div class="site-tools">
          <LangSwitch />
          <ThemeSwitch />
        </div>
        {user && (
          <div class="user">
            <span class="user-name">{t("user.signedIn", { name: user.name })}</span>
            <button
              type="button"
              class="button subtle small"
              data-testid="logout"
              title={t("user.signedIn", { name: user.name })}
              onClick={() => void signOut()}
            >
              {t("user.logout")}
            </button>
          </div>
        )}
      </div>
    </header>
  );
}

function LangSwitch() {
  const { t } = useI18n();
  const current = useStore(langStore);
  return (
    <select
      class="select small"
      data-testid="lang-switch"
      aria-label={t("lang.label")}
      value={current}
      onChange={(event) => setLang((event.currentTarget as HTMLSelectElement).value as Lang)}
    >
      <option value="en">English</option>
      <option value="zh">中文</option>
    </select>
  );
}

function ThemeSwitch() {
  const { t } = useI18n();
  const current = useStore(theme);
  const next = current === "dark" ? "light" : "dark";
  const label = t(next === "dark" ? "theme.toDark" : "theme.toLight");
  return (
    <button
      type="button"
      class="button subtle small icon"
      data-testid="theme-switch"
      aria-label={label}
      title={label}
      onClick={() => setTheme(next)}
    >
      <span aria-hidden="true">{current === "dark" ? "☀" : "☾"}</span>
    </button>
  );
}
