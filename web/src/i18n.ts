// Every visible string, in English and Chinese. The language follows the browser until the user
// picks one; the pick is kept in localStorage.
import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { StopReason } from "./protocol";
import { createStore } from "./store";

export type Lang = "en" | "zh";

const en = {
  "app.name": "deepsolve",
  "app.tagline": "Step-by-step problem solving",
  "nav.label": "Main",
  "nav.solve": "Solve",
  "nav.history": "History",
  "nav.settings": "Settings",
  "lang.label": "Interface language",
  "theme.toDark": "Dark theme",
  "theme.toLight": "Light theme",
  "user.signedIn": "Signed in as {name}",
  "user.logout": "Sign out",
  "common.loading": "Loading…",
  "common.skip": "Skip to the content",
  "common.retry": "Try again",
  "common.close": "Close",
  "error.network": "The server cannot be reached. Check your connection and try again.",
  "error.title": "Something went wrong",

  "login.title": "Sign in",
  "login.intro": "This server needs an access token. Ask its administrator for one.",
  "login.token": "Access token",
  "login.submit": "Sign in",
  "login.busy": "Signing in…",
  "login.empty": "Enter your access token.",
  "login.invalid": "This token is not valid: it is unknown or has been revoked.",
  "login.expired": "Your session expired. Sign in again.",

  "solve.title": "What would you like to solve?",
  "solve.intro":
    "Write the problem below. Markdown and LaTeX both work: `$x^2$` shows as $x^2$, and `$$ … $$` puts a formula on a line of its own.",
  "followup.title": "Ask a follow-up",
  "followup.intro": "The next turn sees the earlier answers of this session.",
  "followup.wait": "You can ask a follow-up once this solve has finished.",
  "editor.label": "Problem",
  "editor.placeholder": "e.g. Prove that $\\sqrt{2}$ is irrational.",
  "editor.preview": "Preview",
  "editor.previewEmpty": "The preview appears here as you type.",
  "editor.count": "{n} / {max} characters",
  "editor.countNoMax": "{n} characters",
  "editor.shortcut": "{key}+Enter to send",
  "examples.label": "Or try one of these:",
  "examples.1": "Solve $x^2 - 5x + 6 = 0$ and plot the parabola.",
  "examples.2": "Prove that $\\sqrt{2}$ is irrational.",
  "examples.3": "Evaluate $\\int_0^1 x e^{x}\\,dx$.",
  "editor.submit": "Solve",
  "editor.submitFollowup": "Send",
  "editor.sending": "Sending…",
  "editor.empty": "Write a problem first.",
  "editor.tooLong": "The problem is {n} characters long; the limit is {max}.",
  "editor.language": "Answer language",
  "editor.options": "Options",
  "editor.tools": "Tools",
  "editor.toolsUnavailable": "The tool list could not be loaded: the server's defaults apply.",
  "editor.unavailable": "unavailable: {reason}",
  "editor.knobs": "Limits for this turn",
  "editor.knobsHint": "Leave a field empty to use the value in force.",
  "knob.range": "{min} to {max}",
  "knob.default": "now {value}",
  "knob.notNumber": "{key}: enter a number.",
  "knob.notInteger": "{key}: enter a whole number.",
  "knob.outOfRange": "{key} must be between {min} and {max}.",
  "language.en": "English",
  "language.zh": "中文",

  "turn.problem": "Problem",
  "turn.plan": "Plan",
  "turn.planning": "Planning",
  "turn.waiting": "Waiting for the first event…",
  "turn.thinking": "Working out a plan…",
  "turn.round": "round {r} of {n}",
  "turn.replans": "replans {k} of {m}",
  "turn.replanned": "replanned: {reason}",
  "turn.oldPlan": "Earlier plan",
  "turn.analysis": "Analysis",
  "turn.stepCurrent": "in progress",
  "turn.stepDone": "done",
  "turn.stepPending": "to do",
  "turn.showWork": "Show the work",
  "turn.hideWork": "Hide the work",
  "turn.noWork": "No work recorded for this step.",
  "turn.reasoning": "Reasoning",
  "turn.answer": "Answer",
  "turn.answerStreaming": "The answer is being written…",
  "turn.answerReady": "The answer is ready.",
  "turn.answerForced": "This answer was forced before the plan was finished: check it with care.",
  "turn.noAnswer": "No answer was given.",
  "turn.copy": "Copy",
  "turn.copied": "Copied",
  "turn.copyFailed": "Copy failed",
  "turn.export": "Export as Markdown",
  "turn.cancel": "Stop",
  "turn.cancelling": "Stopping…",
  "turn.resume": "Resume",
  "turn.resuming": "Resuming…",
  "turn.interrupted": "This turn was interrupted (the server stopped). You can resume it from its last finished step.",
  "turn.connecting": "Connecting…",
  "turn.reconnecting": "Connection lost, reconnecting…",
  "turn.gap": "Some events were missed; reload the page to see everything.",
  "turn.notices": "Notices",
  "footer.rounds": "{n} rounds",
  "footer.tokens": "{in} in · {out} out tokens",
  "footer.estimated": "(estimated)",
  "footer.time": "{t}",
  "footer.cost": "≈ {cost}",

  "tool.running": "running",
  "tool.ok": "ok",
  "tool.error": "error",
  "tool.arguments": "Arguments",
  "tool.output": "Output",
  "tool.noOutput": "(no output)",
  "tool.progress": "Progress",
  "tool.files": "Files",
  "tool.download": "Download {name}",
  "tool.pendingFile": "{name} (available when the turn has stored it)",

  "stop.max_rounds": "Stopped: the round limit was reached",
  "stop.context_limit": "Stopped: the context window was full",
  "stop.turn_timeout": "Stopped: the time limit was reached",
  "stop.model_error": "Stopped: the model failed",
  "stop.cancelled": "Cancelled",
  "stop.answered": "Answered",
  "stop.answered_with_open_steps": "Answered, with some steps left open",
  "stop.answered_without_plan": "Answered without a plan",
  "stop.budget": "Stopped: the token budget was spent",
  "stop.repetition": "Stopped: the model kept repeating itself",
  "stop.empty_rounds": "Stopped: the model gave empty replies",
  "stop.format_errors": "Stopped: too many malformed tool calls",
  "status.running": "Running",
  "status.interrupted": "Interrupted",
  "status.failed": "Failed",

  "session.notFound": "Not found",
  "session.notFoundText": "There is no session at this address.",
  "session.back": "Start a new problem",
  "session.turn": "Turn {n}",

  "history.title": "History",
  "history.empty": "No sessions yet. Solve a problem and it appears here.",
  "history.open": "Open",
  "history.delete": "Delete",
  "history.confirm": "Delete this session and everything in it?",
  "history.confirmYes": "Delete",
  "history.confirmNo": "Keep",
  "history.untitled": "(untitled)",
  "history.deleted": "Session deleted.",

  "settings.title": "Settings",
  "settings.model": "Model",
  "settings.sandbox": "Sandbox",
  "settings.sandboxOk": "available ({backend})",
  "settings.sandboxMissing": "not available",
  "settings.tools": "Tools",
  "settings.toolAvailable": "available",
  "settings.toolDefault": "on by default",
  "settings.knobs": "Solve limits",
  "settings.flags": "Switches",
  "settings.readOnly": "These values are read-only here: only an administrator of a server with a settings file can change them.",
  "settings.save": "Save",
  "settings.saving": "Saving…",
  "settings.saved": "Saved. The new values apply from the next turn.",
  "settings.warnings": "The server adjusted some values:",
  "settings.unchanged": "Nothing changed.",
  "settings.price": "Price",
  "settings.pricePer": "{input} in / {output} out per million tokens ({currency})",
  "settings.capsMissing": "The server does not report its capabilities.",

  "missing.title": "Page not found",
  "missing.text": "There is no page at this address.",
} as const;

export type Key = keyof typeof en;

const zh: Record<Key, string> = {
  "app.name": "deepsolve",
  "app.tagline": "一步一步地解题",
  "nav.label": "主导航",
  "nav.solve": "解题",
  "nav.history": "历史",
  "nav.settings": "设置",
  "lang.label": "界面语言",
  "theme.toDark": "深色主题",
  "theme.toLight": "浅色主题",
  "user.signedIn": "已登录：{name}",
  "user.logout": "退出登录",
  "common.loading": "加载中…",
  "common.skip": "跳到正文",
  "common.retry": "重试",
  "common.close": "关闭",
  "error.network": "无法连接服务器，请检查网络后重试。",
  "error.title": "出错了",

  "login.title": "登录",
  "login.intro": "此服务器需要访问令牌，请向管理员索取。",
  "login.token": "访问令牌",
  "login.submit": "登录",
  "login.busy": "正在登录…",
  "login.empty": "请输入访问令牌。",
  "login.invalid": "此令牌无效：它不存在或已被吊销。",
  "login.expired": "登录已过期，请重新登录。",

  "solve.title": "今天想解决什么问题？",
  "solve.intro": "在下方写下题目，支持 Markdown 和 LaTeX：`$x^2$` 显示为 $x^2$，`$$ … $$` 让公式单独成行。",
  "followup.title": "继续提问",
  "followup.intro": "下一轮会参考本会话之前的解答。",
  "followup.wait": "这一轮解答结束后即可继续提问。",
  "editor.label": "题目",
  "editor.placeholder": "例如：证明 $\\sqrt{2}$ 是无理数。",
  "editor.preview": "预览",
  "editor.previewEmpty": "输入题目后，这里会显示预览。",
  "editor.count": "{n} / {max} 个字符",
  "editor.countNoMax": "{n} 个字符",
  "editor.shortcut": "{key}+Enter 发送",
  "examples.label": "或者试试这些：",
  "examples.1": "解方程 $x^2 - 5x + 6 = 0$，并画出抛物线。",
  "examples.2": "证明 $\\sqrt{2}$ 是无理数。",
  "examples.3": "计算 $\\int_0^1 x e^{x}\\,dx$。",
  "editor.submit": "开始解题",
  "editor.submitFollowup": "发送",
  "editor.sending": "正在发送…",
  "editor.empty": "请先输入题目。",
  "editor.tooLong": "题目长度为 {n} 个字符，超过了 {max} 个字符的上限。",
  "editor.language": "解答语言",
  "editor.options": "选项",
  "editor.tools": "工具",
  "editor.toolsUnavailable": "无法加载工具列表，将使用服务器的默认设置。",
  "editor.unavailable": "不可用：{reason}",
  "editor.knobs": "本轮的限制",
  "editor.knobsHint": "留空则使用当前生效的值。",
  "knob.range": "{min} 至 {max}",
  "knob.default": "当前 {value}",
  "knob.notNumber": "{key}：请输入数字。",
  "knob.notInteger": "{key}：请输入整数。",
  "knob.outOfRange": "{key} 必须介于 {min} 和 {max} 之间。",
  "language.en": "English",
  "language.zh": "中文",

  "turn.problem": "题目",
  "turn.plan": "计划",
  "turn.planning": "制定计划",
  "turn.waiting": "正在等待第一个事件…",
  "turn.thinking": "正在制定计划…",
  "turn.round": "第 {r} / {n} 轮",
  "turn.replans": "已重新规划 {k} / {m} 次",
  "turn.replanned": "已重新规划：{reason}",
  "turn.oldPlan": "之前的计划",
  "turn.analysis": "分析",
  "turn.stepCurrent": "进行中",
  "turn.stepDone": "已完成",
  "turn.stepPending": "待完成",
  "turn.showWork": "查看过程",
  "turn.hideWork": "收起过程",
  "turn.noWork": "此步骤没有记录的过程。",
  "turn.reasoning": "思考过程",
  "turn.answer": "解答",
  "turn.answerStreaming": "正在撰写解答…",
  "turn.answerReady": "解答已完成。",
  "turn.answerForced": "此解答是在计划完成之前被强制给出的，请仔细核对。",
  "turn.noAnswer": "没有给出解答。",
  "turn.copy": "复制",
  "turn.copied": "已复制",
  "turn.copyFailed": "复制失败",
  "turn.export": "导出为 Markdown",
  "turn.cancel": "停止",
  "turn.cancelling": "正在停止…",
  "turn.resume": "继续",
  "turn.resuming": "正在继续…",
  "turn.interrupted": "此轮已中断（服务器停止了运行）。可以从最后完成的步骤继续。",
  "turn.connecting": "正在连接…",
  "turn.reconnecting": "连接已断开，正在重新连接…",
  "turn.gap": "有事件未能收到，请刷新页面查看全部内容。",
  "turn.notices": "提示",
  "footer.rounds": "{n} 轮",
  "footer.tokens": "输入 {in} · 输出 {out} 个令牌",
  "footer.estimated": "（估算）",
  "footer.time": "{t}",
  "footer.cost": "约 {cost}",

  "tool.running": "运行中",
  "tool.ok": "成功",
  "tool.error": "出错",
  "tool.arguments": "参数",
  "tool.output": "输出",
  "tool.noOutput": "（无输出）",
  "tool.progress": "进度",
  "tool.files": "文件",
  "tool.download": "下载 {name}",
  "tool.pendingFile": "{name}（保存后即可下载）",

  "stop.max_rounds": "已停止：达到轮次上限",
  "stop.context_limit": "已停止：上下文窗口已满",
  "stop.turn_timeout": "已停止：达到时间上限",
  "stop.model_error": "已停止：模型出错",
  "stop.cancelled": "已取消",
  "stop.answered": "已解答",
  "stop.answered_with_open_steps": "已解答，但仍有步骤未完成",
  "stop.answered_without_plan": "已解答（未制定计划）",
  "stop.budget": "已停止：令牌预算已用完",
  "stop.repetition": "已停止：模型反复输出相同内容",
  "stop.empty_rounds": "已停止：模型多次返回空回复",
  "stop.format_errors": "已停止：工具调用格式错误过多",
  "status.running": "进行中",
  "status.interrupted": "已中断",
  "status.failed": "失败",

  "session.notFound": "未找到",
  "session.notFoundText": "此地址下没有会话。",
  "session.back": "开始新的题目",
  "session.turn": "提问 {n}",

  "history.title": "历史",
  "history.empty": "还没有会话。解一道题，它就会出现在这里。",
  "history.open": "打开",
  "history.delete": "删除",
  "history.confirm": "确定删除此会话及其全部内容吗？",
  "history.confirmYes": "删除",
  "history.confirmNo": "保留",
  "history.untitled": "（无标题）",
  "history.deleted": "会话已删除。",

  "settings.title": "设置",
  "settings.model": "模型",
  "settings.sandbox": "沙箱",
  "settings.sandboxOk": "可用（{backend}）",
  "settings.sandboxMissing": "不可用",
  "settings.tools": "工具",
  "settings.toolAvailable": "可用",
  "settings.toolDefault": "默认开启",
  "settings.knobs": "解题限制",
  "settings.flags": "开关",
  "settings.readOnly": "这些值在此处只读：只有配有设置文件的服务器的管理员才能修改。",
  "settings.save": "保存",
  "settings.saving": "正在保存…",
  "settings.saved": "已保存，新值从下一轮开始生效。",
  "settings.warnings": "服务器调整了部分值：",
  "settings.unchanged": "没有改动。",
  "settings.price": "价格",
  "settings.pricePer": "每百万令牌：输入 {input} / 输出 {output}（{currency}）",
  "settings.capsMissing": "服务器未提供其能力信息。",

  "missing.title": "页面不存在",
  "missing.text": "此地址下没有页面。",
};

const dictionaries: Record<Lang, Record<Key, string>> = { en, zh };
const KEY = "deepsolve.lang";

function initialLang(): Lang {
  try {
    const stored = localStorage.getItem(KEY);
    if (stored === "en" || stored === "zh") return stored;
  } catch {
    // No storage: fall back to the browser's language.
  }
  return navigator.language.toLowerCase().startsWith("zh") ? "zh" : "en";
}

export const lang = createStore<Lang>(initialLang());

function applyLang(value: Lang) {
  document.documentElement.lang = value === "zh" ? "zh-CN" : "en";
}
applyLang(lang.get());
lang.subscribe(applyLang);

export function setLang(value: Lang): void {
  try {
    localStorage.setItem(KEY, value);
  } catch {
    // The choice lasts for this page only.
  }
  lang.set(value);
}

export type Params = Record<string, string | number>;
export type Translate = (key: Key, params?: Params) => string;

export function translator(value: Lang): Translate {
  const dictionary = dictionaries[value];
  return (key, params) => {
    const text = dictionary[key] ?? en[key];
    if (!params) return text;
    return text.replace(/\{(\w+)\}/g, (whole, name: string) =>
      name in params ? String(params[name]) : whole,
    );
  };
}

export const I18n = createContext<{ lang: Lang; t: Translate }>({ lang: "en", t: translator("en") });

export function useI18n(): { lang: Lang; t: Translate } {
  return useContext(I18n);
}

export function stopReasonText(t: Translate, reason: StopReason): string {
  return t(`stop.${reason}` as Key);
}

// The server describes its knobs in English; the ones it ships with, in Chinese too.
const KNOB_HELP_ZH: Record<string, string> = {
  temperature: "采样温度",
  max_tokens: "每次调用模型的输出令牌数",
  max_rounds: "可以使用工具的模型调用次数",
  max_replans: "重新规划（solve_replan）的次数上限",
  max_steps: "计划的步骤数上限，更长的计划会被截断",
  settlement_rounds: "超过 max_rounds 后附带“立即完成”提示的额外轮数",
  turn_timeout_s: "每轮提问的总时长上限（秒）",
  tool_timeout_s: "每次工具调用的时长上限（秒）",
  code_timeout_s: "在沙箱中运行代码的工具每次调用的时长上限（秒）",
  stream_idle_timeout_s: "模型在这么多秒内没有输出任何字节即视为出错",
  max_parallel_tool_calls: "每轮最多运行的工具调用数，其余的会被跳过",
  token_budget: "每轮提问的令牌总预算；0 表示不限",
  ultimatum_at: "上下文窗口占用达到此比例时强制给出解答",
  plan_first: "在 solve_plan 之前拒绝使用工作工具",
  fold: "把已完成步骤的消息折叠出上下文（仅在测量折叠效果时关闭）",
};

export function knobHelp(value: Lang, key: string, serverHelp: string): string {
  return value === "zh" ? (KNOB_HELP_ZH[key] ?? serverHelp) : serverHelp;
}
