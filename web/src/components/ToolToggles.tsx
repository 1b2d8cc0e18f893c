import type { ToolView } from "../protocol";
import { useI18n } from "../i18n";

type Props = {
  idPrefix: string;
  tools: ToolView[];
  chosen: Set<string>;
  onChange: (chosen: Set<string>) => void;
};

export function ToolToggles(props: Props) {
  const { t } = useI18n();
  function toggle(name: string, on: boolean) {
    const next = new Set(props.chosen);
    if (on) next.add(name);
    else next.delete(name);
    props.onChange(next);
  }
  return (
    <fieldset class="fieldset tools">
      <legend>{t("editor.tools")}</legend>
      <ul class="toggle-list">
        {props.tools.map((tool) => {
          const id = `${props.idPrefix}-tool-${tool.name}`;
          const why = !tool.available && tool.reason ? `${id}-why` : undefined;
          return (
            <li key={tool.name} class={tool.available ? "toggle" : "toggle unavailable"}>
              <input
                id={id}
                type="checkbox"
                checked={tool.available && props.chosen.has(tool.name)}
                disabled={!tool.available}
                aria-describedby={why ?? `${id}-about`}
                onChange={(event) => toggle(tool.name, (event.currentTarget as HTMLInputElement).checked)}
              />
              <label for={id}>
                <code class="tool-label">{tool.name}</code>
                <span id={`${id}-about`} class="muted small">
                  {tool.description}
                </span>
                {why && (
                  <span id={why} class="reason">
                    {t("editor.unavailable", { reason: tool.reason ?? "" })}
                  </span>
                )}
              </label>
            </li>
          );
        })}
      </ul>
    </fieldset>
  );
}
