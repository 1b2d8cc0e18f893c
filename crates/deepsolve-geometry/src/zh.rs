//! Every error message in Chinese: a model working in Chinese is told what is wrong in
//! Chinese (command names, names and quoted text stay as written).

use crate::error::ErrorKind;
use crate::names::{COMMANDS, command_info};

/// The message of `kind`, in Chinese.
pub(crate) fn message(kind: &ErrorKind) -> String {
    use ErrorKind as K;
    match kind {
        K::UnexpectedChar(c) => format!("意外的字符 '{c}'"),
        K::BadNumber(s) => format!("'{s}' 不是可读取的数（只能是数字，至多一个 '.'，且有限）"),
        K::NameTooLong(n) => format!("名字超过 {n} 个字符"),
        K::UnterminatedText => "文本缺少结尾的 '\"'".into(),
        K::LineTooLong(n) => format!("命令超过 {n} 个字符"),
        K::TooDeep(n) => format!("表达式嵌套超过 {n} 层"),
        K::TooManyCommands(n) => format!("脚本超过 {n} 条命令"),
        K::Unexpected { expected, found } => {
            format!("此处应为{}，却是{}", phrase(expected), found_zh(found))
        }
        K::UnexpectedEnd { expected } => format!("命令在应为{}的地方结束了", phrase(expected)),
        K::UnknownCommand {
            name,
            suggestion,
            alternative,
        } => match (suggestion, alternative) {
            (Some(s), _) => format!("未知命令 '{name}'；是否想写 '{s}'？"),
            (None, Some(how)) => format!("不支持命令 '{name}'；可以这样构造：{how}"),
            (None, None) => {
                let known: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
                format!("未知命令 '{name}'（支持的命令：{}）", known.join("、"))
            }
        },
        K::Reserved(n) => format!("'{n}' 是保留字（命令、函数、常数或坐标），不能用作对象名"),
        K::UnknownName { name, suggestion } => match suggestion {
            Some(s) => format!("未知名字 '{name}'；是否想写 '{s}'？"),
            None => format!("未知名字 '{name}'"),
        },
        K::ForwardReference { name, line } => {
            format!("'{name}' 在定义（第 {line} 行）之前就被使用了；请先定义它")
        }
        K::DependsOnFailed { name, line } => {
            format!("'{name}'（第 {line} 行）无法构造，因此这里也无法构造")
        }
        K::Redefined { name, line } => {
            format!("'{name}' 已在第 {line} 行定义；一个名字只能对应一个对象")
        }
        K::VariableOutsideFunction(n) => format!("'{n}' 是函数的自变量，在函数之外没有值"),
        K::WrongArguments {
            command,
            expects,
            got,
        } => {
            let expects = command_info(command).map_or(*expects, |c| c.expects_zh);
            let got: Vec<&str> = got.split(", ").map(kind_zh).collect();
            format!(
                "{command} 的参数应为 {expects}；实际为 ({})",
                got.join(", ")
            )
        }
        K::WrongOperands { op, lhs, rhs } => format!(
            "不能对{}和{}做{}",
            kind_zh(lhs),
            kind_zh(rhs),
            operation(op)
        ),
        K::WrongType { expected, got } => {
            format!("此处应为{}，实际为{}", phrase(expected), kind_zh(got))
        }
        K::NotAnObjectName(command) => format!("{command} 的第一个参数必须是已有对象的名字"),
        K::NotAssignable(command) => {
            format!("{command} 只修改对象，没有可赋的值；请把它单独写成一行")
        }
        K::FunctionArity { name, got } => format!("'{name}' 只接受一个参数；实际给了 {got} 个"),
        K::NotAFunction { name, kind } => format!("'{name}' 是{}，不是函数", kind_zh(kind)),
        K::ParallelLines => "两条直线平行，没有交点".into(),
        K::SameLine => "两条直线重合：处处相交，而不是交于一点".into(),
        K::SameCircle => "两个圆重合：处处相交，而不是交于若干点".into(),
        K::NoIntersection => "这些对象不相交".into(),
        K::IntersectionIndex { index, count } => {
            format!("只有 {count} 个交点；不存在第 {index} 个")
        }
        K::BadIndex(v) => format!("交点序号应为从 1 开始的整数；实际为 {v}"),
        K::Collinear => "三点共线：没有圆经过它们".into(),
        K::CoincidentPoints(why) => format!("点重合：{}", phrase(why)),
        K::ParallelNoAngle => "两条直线平行：不在一点处形成角".into(),
        K::ZeroDirection => "方向是零向量".into(),
        K::BadRadius(r) => format!("圆的半径必须为正；实际为 {r}"),
        K::NotFinite => "该值不是有限数（是否除以零，或对负数开平方、取对数？）".into(),
        K::OutOfRange(m) => format!("坐标或半径超出 ±{m}"),
        K::TextTooLong(n) => format!("文本超过 {n} 个字符"),
        K::BadColor(c) => format!(
            "未知颜色 '{c}'：请使用 black、gray、red、orange、yellow、green、teal、blue、purple、magenta、brown 之一，或 \"#rrggbb\""
        ),
        K::FunctionTooLarge(n) => format!("函数太大，无法绘制（每个值超过 {n} 次运算）"),
        K::FunctionsTooLarge(n) => {
            format!("脚本中的函数合起来太大，无法绘制（每个值超过 {n} 次运算）")
        }
    }
}

/// The fixed English phrases errors are built from, in Chinese.
fn phrase(english: &str) -> &str {
    match english {
        "the end of the command" => "命令结尾",
        "an expression" => "表达式",
        "')' after a point's two coordinates" => "点的两个坐标之后的 ')'",
        "')' or ','" => "')' 或 ','",
        "',' or ')'" => "',' 或 ')'",
        "a number" => "数",
        "a point or a vector" => "点或向量",
        "a number, a point or a vector after a sign" => "正负号后的数、点或向量",
        "a segment needs two different points" => "线段需要两个不同的点",
        "a line needs two different points" => "直线需要两个不同的点",
        "a ray needs two different points" => "射线需要两个不同的点",
        "a vector needs two different points" => "向量需要两个不同的点",
        "a circle through its own centre has no radius" => "经过自身圆心的圆没有半径",
        "a circle through three points needs three different points" => {
            "过三点的圆需要三个不同的点"
        }
        "the polygon's vertices are on one line, so it has no area" => {
            "多边形的顶点都在一条直线上，面积为零"
        }
        "an angle's arms must lead away from its vertex" => "角的两边必须从顶点指向别处",
        other => other,
    }
}

/// A token as an error found it (`the number 2`, `'A'`, `a text in quotes`).
fn found_zh(found: &str) -> String {
    if let Some(number) = found.strip_prefix("the number ") {
        return format!("数 {number}");
    }
    match found {
        "a text in quotes" => "带引号的文本".into(),
        other => other.into(),
    }
}

/// A kind of value, with or without its article (`a point`, `segment`).
pub(crate) fn kind_zh(english: &str) -> &str {
    let bare = english
        .strip_prefix("an ")
        .or_else(|| english.strip_prefix("a "))
        .unwrap_or(english);
    match bare {
        "number" => "数",
        "boolean" => "布尔值",
        "text" => "文本",
        "point" => "点",
        "vector" => "向量",
        "segment" => "线段",
        "line" => "直线",
        "ray" => "射线",
        "circle" => "圆",
        "polygon" => "多边形",
        "angle" => "角",
        "function" => "函数",
        "command of objects" => "作用于对象的命令",
        other => other,
    }
}

fn operation(verb: &str) -> &str {
    match verb {
        "add" => "加法",
        "subtract" => "减法",
        "multiply" => "乘法",
        "divide" => "除法",
        "raise" => "乘方",
        other => other,
    }
}
