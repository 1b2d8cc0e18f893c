// A step's work in order: what the model said, its reasoning (folded), tool calls, notices.
import { useI18n } from "../i18n";
import { Markdown } from "../render/Markdown";
import type { TimelineItem } from "../state/view";
import { ToolCard } from "./ToolCard";

export function Timeline(props: { items: TimelineItem[] }) {
  return (
    <ol class="timeline">
      {props.items.map((item, i) => (
        <li key={item.kind === "tool" ? item.card.callId : `${item.kind}-${i}`} class={`timeline-item ${item.kind}`}>
          <Item item={item} />
        </li>
      ))}
    </ol>
  );
}

function Item(props: { item: TimelineItem }) {
  const { t } = useI18n();
  const { item } = props;
  switch (item.kind) {
    case "narration":
      return <Markdown class="narration" text={item.text} />;
    case "reasoning":
      return (
        <details class="reasoning">
          <summary>{t("turn.reasoning")}</summary>
          <div class="reasoning-text">{item.text}</div>
        </details>
      );
    case "tool":
      return <ToolCard card={item.card} />;
    case "notice":
      return <p class={`notice ${item.level}`}>{item.text}</p>;
  }
}
