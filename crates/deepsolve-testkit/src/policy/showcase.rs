//! [`Showcase`]: a realistic tutoring solve of a quadratic, for the web UI's browser tests,
//! its screenshots and its benchmark.

use deepsolve_core::solve::spine::{SOLVE_FINISH_STEP, SOLVE_PLAN};
use serde_json::json;

use crate::policy::Policy;
use crate::reply::{Reply, Turn};
use crate::request::PolicyRequest;

/// The problem the showcase solves (any problem gets the same solve).
pub const SHOWCASE_PROBLEM: &str = "Solve x² − 5x + 6 = 0 and plot the parabola";

/// The Python the second step runs: prints the roots, writes them to `roots.txt` (a file
/// that is not an image) and saves the figure.
pub const SHOWCASE_CODE: &str = r#"import numpy as np
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

roots = sorted(round(float(r), 6) for r in np.roots([1, -5, 6]).real)
print("roots:", roots)
with open("roots.txt", "w") as out:
    out.write(f"x1 = {roots[0]}\nx2 = {roots[1]}\n")

x = np.linspace(0, 5, 200)
plt.figure(figsize=(5, 3.5))
plt.plot(x, x**2 - 5*x + 6, label="y = x^2 - 5x + 6")
plt.axhline(0, color="gray", linewidth=0.8)
plt.scatter(roots, [0, 0], color="red", zorder=3, label="roots")
plt.legend()
plt.savefig("parabola.png", dpi=80)
plt.close()
print("saved parabola.png")
"#;

/// What the code prints for the roots when it ran.
pub const SHOWCASE_ROOTS_LINE: &str = "roots: [2.0, 3.0]";

/// Markup a hostile model might write; [`ShowcaseVariant::Hostile`] puts it in a goal, a
/// narration, a summary and the answer. None of it may run in a page that shows it.
pub const HOSTILE_MARKUP: &str = "<img src=x onerror=\"window.__deepsolvePwned=1\"><script>window.__deepsolvePwned=2</script><a href=\"javascript:window.__deepsolvePwned=3\">click</a>";

/// Which showcase plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShowcaseVariant {
    /// The solve as a tutor writes it.
    Plain,
    /// The same solve with [`HOSTILE_MARKUP`] in what the model writes.
    Hostile,
    /// The same solve with reasoning in every round, a longer answer and text streamed two
    /// characters per delta: a turn of a few thousand events when the mock is paced (for the
    /// UI benchmark's rendering time).
    Long,
}

/// Plans three steps and works them like a tutor:
/// 1. `S1` factors the quadratic: a `reason` call when offered (its sub-call answers a short
///    derivation), else narration only; then `solve_finish_step`.
/// 2. `S2` runs [`SHOWCASE_CODE`] with `code_execution` when offered (it prints the roots and
///    saves `parabola.png`), then finishes with what it printed.
/// 3. `S3` checks both roots in narration and finishes in the same round.
///
/// Then it answers in Markdown with inline and display maths (`$…$`, `$$…$$`, `\(…\)`), a
/// code block and a table. Step summaries carry LaTeX. A forced answer gets the same answer.
///
/// **Expected ending:** `answered` after 7 rounds with both work tools offered (`reason` and
/// `code_execution`), 6 with one of them, 5 with neither; every step done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Showcase {
    pub variant: ShowcaseVariant,
}

impl Showcase {
    pub fn new(variant: ShowcaseVariant) -> Self {
        Showcase { variant }
    }

    fn hostile(&self) -> &'static str {
        if self.variant == ShowcaseVariant::Hostile {
            HOSTILE_MARKUP
        } else {
            ""
        }
    }

    /// The plan's goals, in order.
    pub fn goals(&self) -> [String; 3] {
        [
            "Factor $x^2-5x+6$ into linear factors".to_string(),
            "Compute the roots with Python and plot the parabola".to_string(),
            format!(
                "Check both roots in the original equation{}",
                self.hostile()
            ),
        ]
    }

    fn next_move(&self, req: &PolicyRequest) -> Reply {
        if req.is_subcall() {
            return Reply::text(DERIVATION);
        }
        if req.is_forced_answer() {
            return Reply::text(self.answer());
        }
        let Some(plan) = req.plan() else {
            return self.plan_reply();
        };
        let Some(step) = plan.current() else {
            return Reply::text(self.answer());
        };
        let position = plan.steps.iter().position(|s| s.id == step.id);
        match position {
            Some(0) => self.factor_move(req, &step.id),
            Some(1) => self.code_move(req, &step.id),
            _ => self.check_move(&step.id),
        }
    }

    fn plan_reply(&self) -> Reply {
        let steps: Vec<_> = self.goals().iter().map(|g| json!({"goal": g})).collect();
        let analysis = "A quadratic with integer coefficients: its discriminant $25-24=1$ is a \
                        perfect square, so it factors over the integers. Factor it, confirm the \
                        roots numerically with a plot, then check them.";
        Turn::calls(vec![(
            SOLVE_PLAN,
            json!({"analysis": analysis, "steps": steps}),
        )])
        .with_text("Let me plan this before computing anything.")
        .into()
    }

    fn factor_move(&self, req: &PolicyRequest, step_id: &str) -> Reply {
        let narration = "We look for two numbers whose product is $6$ and whose sum is $5$: \
                         they are $2$ and $3$.";
        if req.offers("reason") && req.calls_to("reason") == 0 {
            let query = format!("[{step_id}] Factor x^2-5x+6 over the integers.");
            return Turn::calls(vec![("reason", json!({"query": query}))])
                .with_text(narration)
                .into();
        }
        let summary = "$x^2-5x+6=(x-2)(x-3)$, since $2\\cdot 3=6$ and $2+3=5$.";
        let text = if req.calls_to("reason") == 0 {
            narration
        } else {
            "The derivation confirms the factorisation."
        };
        finish(step_id, summary).with_text(text).into()
    }

    fn code_move(&self, req: &PolicyRequest, step_id: &str) -> Reply {
        if req.offers("code_execution") && req.calls_to("code_execution") == 0 {
            return Turn::calls(vec![("code_execution", json!({"code": SHOWCASE_CODE}))])
                .with_text("Now a numerical check and a picture of the parabola.")
                .into();
        }
        let printed = req.tool_results().iter().any(|r| {
            r.name.as_deref() == Some("code_execution") && r.content.contains(SHOWCASE_ROOTS_LINE)
        });
        let summary = if printed {
            format!(
                "Python prints `{SHOWCASE_ROOTS_LINE}`: the roots are $x_1=2$ and $x_2=3$; \
                 the parabola is saved as `parabola.png`.{}",
                self.hostile()
            )
        } else {
            "No code ran; the roots $x_1=2$ and $x_2=3$ follow from the factorisation.".to_string()
        };
        finish(step_id, &summary)
            .with_text("The output matches the factorisation.")
            .into()
    }

    fn check_move(&self, step_id: &str) -> Reply {
        let narration = format!(
            "Substituting back: $2^2-5\\cdot 2+6=4-10+6=0$ and $3^2-5\\cdot 3+6=9-15+6=0$.{}",
            self.hostile()
        );
        let summary =
            "Both roots satisfy the equation: $2^2-5\\cdot 2+6=0$ and $3^2-5\\cdot 3+6=0$.";
        finish(step_id, summary).with_text(narration).into()
    }

    /// The final answer, in Markdown.
    pub fn answer(&self) -> String {
        let mut text = String::from(ANSWER);
        if self.variant == ShowcaseVariant::Hostile {
            text.push_str("\n\n");
            text.push_str(HOSTILE_MARKUP);
        }
        if self.variant == ShowcaseVariant::Long {
            for k in 1..=10 {
                text.push_str(&format!(
                    "\n\n**Remark {k}.** Shifting by $k={k}$ gives $(x-2-{k})(x-3-{k})=x^2-({k2}+5)x+({k}+2)({k}+3)$, \
                     whose roots $x={a}$ and $x={b}$ are again one apart, because the discriminant \
                     $\\Delta=({k2}+5)^2-4({k}+2)({k}+3)=1$ does not change under a shift.",
                    k2 = 2 * k,
                    a = k + 2,
                    b = k + 3,
                ));
            }
        }
        text
    }

    /// Reasoning for the long variant's rounds.
    fn reasoning(&self) -> Option<&'static str> {
        (self.variant == ShowcaseVariant::Long).then_some(
            "The coefficients are small integers, so the rational root theorem limits the \
             candidates to the divisors of 6: ±1, ±2, ±3, ±6. Trying x = 2 gives 4 - 10 + 6 = 0 \
             and x = 3 gives 9 - 15 + 6 = 0, so both are roots, and a quadratic has at most two. \
             The vertex lies halfway between them at x = 5/2, where y = 25/4 - 25/2 + 6 = -1/4.",
        )
    }

    /// The long variant's delta shape: reasoning on every visible round, two characters per
    /// text delta.
    fn styled(&self, turn: Turn) -> Turn {
        let Some(reasoning) = self.reasoning() else {
            return turn;
        };
        let mut turn = turn.with_reasoning(reasoning);
        turn.style.text_chunk = 2;
        turn
    }
}

fn finish(step_id: &str, summary: &str) -> Turn {
    Turn::calls(vec![(
        SOLVE_FINISH_STEP,
        json!({"step_id": step_id, "summary": summary}),
    )])
}

/// The `reason` tool's sub-call answer.
const DERIVATION: &str = "We need $p+q=5$ and $pq=6$. The factor pairs of $6$ are $(1,6)$ and \
$(2,3)$; only $2+3=5$. Hence $x^2-5x+6=(x-2)(x-3)$.\nAnswer: $(x-2)(x-3)$";

const ANSWER: &str = r#"**Solution.** The equation $x^2-5x+6=0$ has two real roots: $x = 2$ and $x = 3$.

Factor the left-hand side:

$$x^2-5x+6=(x-2)(x-3)$$

A product is zero exactly when one of its factors is, so \(x-2=0\) or \(x-3=0\).

| $x$ | $x^2-5x+6$ |
|----:|-----------:|
| 2   | 0          |
| 3   | 0          |

The roots were confirmed numerically:

```python
import numpy as np
print(np.roots([1, -5, 6]))  # [3. 2.]
```

The parabola $y=x^2-5x+6$ opens upwards, has its vertex at $\left(\tfrac52,-\tfrac14\right)$ and crosses the $x$-axis at the two roots."#;

impl Policy for Showcase {
    fn reply(&self, req: &PolicyRequest) -> Reply {
        let reply = self.next_move(req);
        if req.is_subcall() {
            return reply;
        }
        reply.map_turn(|turn| self.styled(turn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_carries_every_kind_of_maths_a_code_block_and_a_table() {
        let answer = Showcase::new(ShowcaseVariant::Plain).answer();
        for piece in [
            "$x = 2$",
            "$$x^2-5x+6=(x-2)(x-3)$$",
            "\\(x-2=0\\)",
            "```python",
            "|----:|",
        ] {
            assert!(answer.contains(piece), "{piece}");
        }
        assert!(!answer.contains('<'), "the plain answer has no markup");
    }

    #[test]
    fn only_the_hostile_variant_writes_markup() {
        let hostile = Showcase::new(ShowcaseVariant::Hostile);
        assert!(hostile.answer().ends_with(HOSTILE_MARKUP));
        assert!(hostile.goals()[2].contains("onerror"));
        let plain = Showcase::new(ShowcaseVariant::Plain);
        assert!(plain.goals().iter().all(|g| !g.contains('<')));
    }

    #[test]
    fn the_code_prints_the_roots_and_saves_the_figure() {
        assert!(SHOWCASE_CODE.contains("print(\"roots:\", roots)"));
        assert!(SHOWCASE_CODE.contains("savefig(\"parabola.png\""));
        assert!(SHOWCASE_CODE.contains("open(\"roots.txt\", \"w\")"));
    }

    #[test]
    fn the_long_variant_streams_thousands_of_deltas() {
        let long = Showcase::new(ShowcaseVariant::Long);
        let answer = long.styled(Turn::text(long.answer()));
        let deltas = answer.text.as_deref().unwrap_or_default().chars().count() / 2
            + answer
                .reasoning
                .as_deref()
                .unwrap_or_default()
                .chars()
                .count()
                / 2;
        assert!(deltas > 1000, "{deltas}");
    }
}
