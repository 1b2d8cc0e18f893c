//! The labelled question set of `bench kb`: course notes written for it (three English PDFs of
//! four pages, three Chinese Markdown notes), the testkit's fixture documents beside them (a
//! five-topic lecture PDF, a Chinese PDF, a DOCX, an HTML article, Markdown notes: on the
//! same subjects, so they compete for most questions), and questions, each labelled with the
//! document and page that answers it. Most questions share words with their page; the `paraphrase` ones
//! on purpose share few, and the `cross-lingual` ones ask in one language about notes in the
//! other: the cases where lexical retrieval is expected to fail.

/// A document of the set: its file name and its pages (one text per page).
pub(crate) struct Doc {
    pub(crate) name: &'static str,
    pub(crate) pages: &'static [&'static str],
}

/// A question and where its answer is.
pub(crate) struct Question {
    pub(crate) text: &'static str,
    pub(crate) doc: &'static str,
    pub(crate) page: u32,
    pub(crate) kind: &'static str,
}

pub(crate) const PDFS: &[Doc] = &[
    Doc {
        name: "calculus.pdf",
        pages: &[
            "1 Limits. The limit of f(x) as x approaches a is L when f(x) can be made as close to L as we like by taking x close enough to a. In the epsilon-delta definition, for every epsilon greater than zero there is a delta greater than zero such that 0 < |x - a| < delta implies |f(x) - L| < epsilon. One-sided limits approach a from the left or from the right only; the two-sided limit exists exactly when both one-sided limits exist and agree.\n\nThe squeeze theorem: if g(x) <= f(x) <= h(x) near a, and g and h both tend to L, then f tends to L as well. It proves that sin(x)/x tends to 1 as x tends to 0. A function is continuous at a when its limit at a equals its value there.",
            "2 Derivatives. The derivative of f at a is the limit of the difference quotient (f(a + h) - f(a)) / h as h tends to 0: the slope of the tangent line, the instantaneous rate of change. A differentiable function is continuous, but |x| is continuous and not differentiable at 0.\n\nThe product rule: (fg)' = f'g + fg'. The quotient rule: (f/g)' = (f'g - fg') / g^2. The chain rule differentiates a composition: the derivative of f(g(x)) is f'(g(x)) times g'(x). For example the derivative of sin(x^2) is 2x cos(x^2).",
            "3 Integration by parts. From the product rule, the integral of u dv equals uv minus the integral of v du. Choose u as the factor that becomes simpler when differentiated: the LIATE order (logarithmic, inverse trigonometric, algebraic, trigonometric, exponential) is a rule of thumb.\n\nExample: the integral of x e^x dx. Take u = x and dv = e^x dx, so du = dx and v = e^x; the integral is x e^x - e^x + C. For the integral of ln(x) take u = ln(x) and dv = dx. Repeated integration by parts may return the original integral, which is then solved for algebraically.",
            "4 Taylor series. The Taylor series of f about a is the sum of f^(n)(a) (x - a)^n / n! over n from zero. About a = 0 it is called a Maclaurin series: e^x = 1 + x + x^2/2! + x^3/3! + ..., and sin(x) = x - x^3/3! + x^5/5! - ...\n\nTruncating after the degree n term leaves the Lagrange remainder f^(n+1)(c) (x - a)^(n+1) / (n+1)! for some c between a and x, which bounds the error of the polynomial approximation. A power series converges inside its radius of convergence, found with the ratio test.",
        ],
    },
    Doc {
        name: "linear-algebra.pdf",
        pages: &[
            "1 Vectors and span. A linear combination of vectors v1, ..., vk is a sum c1 v1 + ... + ck vk with scalar coefficients. The span of a set of vectors is the set of all their linear combinations; it is always a subspace.\n\nVectors are linearly independent when the only combination equal to the zero vector has all coefficients zero. A basis of a subspace is a linearly independent spanning set, and every basis has the same number of vectors: the dimension. In R^3 the vectors (1,0,0), (0,1,0) and (0,0,1) form the standard basis.",
            "2 Matrices and determinants. The determinant of a 2 by 2 matrix with rows (a, b) and (c, d) is ad - bc. A square matrix is invertible exactly when its determinant is not zero. The determinant of a product is the product of the determinants, and swapping two rows changes its sign.\n\nCofactor expansion computes a determinant along any row or column. The absolute value of the determinant is the factor by which the linear map scales volumes. Row reduction to echelon form gives the rank: the number of pivots, equal to the dimension of the column space.",
            "3 Eigenvalues and eigenvectors. A nonzero vector v is an eigenvector of A with eigenvalue lambda when A v = lambda v. The eigenvalues are the roots of the characteristic polynomial det(A - lambda I) = 0.\n\nA matrix with n linearly independent eigenvectors is diagonalizable: A = P D P^-1 with the eigenvectors as the columns of P and the eigenvalues on the diagonal of D. Then powers are easy: A^k = P D^k P^-1. A real symmetric matrix always has real eigenvalues and an orthonormal basis of eigenvectors (the spectral theorem).",
            "4 Orthogonality and least squares. Two vectors are orthogonal when their dot product is zero. The Gram-Schmidt process turns a basis into an orthonormal basis by subtracting from each vector its projections onto the earlier ones and normalising.\n\nThe orthogonal projection of b onto the column space of A is the closest point to b in that subspace. When A x = b has no solution, the least squares solution solves the normal equations A^T A x = A^T b, minimising the length of the residual b - A x. Fitting a line to data points is a least squares problem.",
        ],
    },
    Doc {
        name: "probability.pdf",
        pages: &[
            "1 Conditional probability. The probability of A given B is P(A and B) / P(B), defined when P(B) > 0. Events are independent when P(A and B) = P(A) P(B), that is when knowing B does not change the probability of A.\n\nBayes' theorem reverses a conditional: P(A | B) = P(B | A) P(A) / P(B). With the law of total probability, P(B) is the sum of P(B | Ai) P(Ai) over a partition. A classic example is a medical test: even an accurate test for a rare disease gives mostly false positives.",
            "2 Random variables and expectation. A random variable assigns a number to each outcome. Its expectation E[X] is the probability-weighted average of its values. Expectation is linear: E[aX + bY] = a E[X] + b E[Y], whether or not X and Y are independent.\n\nThe variance Var(X) = E[(X - E[X])^2] = E[X^2] - E[X]^2 measures spread; its square root is the standard deviation. For independent variables the variance of the sum is the sum of the variances. Markov's and Chebyshev's inequalities bound tail probabilities using the mean and the variance.",
            "3 The binomial and Poisson distributions. The number of successes in n independent trials, each succeeding with probability p, is binomial: P(X = k) = C(n, k) p^k (1 - p)^(n - k), with mean np and variance np(1 - p).\n\nThe Poisson distribution with rate lambda counts rare events in a fixed interval: P(X = k) = lambda^k e^(-lambda) / k!, with mean and variance both equal to lambda. It approximates the binomial when n is large and p is small, with lambda = np, for example the number of typing errors on a page.",
            "4 Limit theorems. The law of large numbers: the average of n independent, identically distributed samples converges to the expectation as n grows. The central limit theorem: the standardised sum of such samples tends to the standard normal distribution, whatever the distribution of each sample, provided its variance is finite.\n\nSo the sample mean is approximately normal with mean mu and standard deviation sigma divided by the square root of n. This justifies confidence intervals such as the sample mean plus or minus 1.96 standard errors for 95 percent.",
        ],
    },
];

pub(crate) const MARKDOWN: &[Doc] = &[
    Doc {
        name: "牛顿定律.md",
        pages: &[
            "# 牛顿运动定律\n\n## 第一定律\n\n物体在不受外力作用时，保持静止或匀速直线运动状态，这种性质叫做惯性。质量是惯性大小的量度。\n\n## 第二定律\n\n物体的加速度与所受合外力成正比，与质量成反比，公式为 F = ma。力的单位是牛顿。\n\n## 第三定律\n\n两个物体之间的作用力和反作用力大小相等、方向相反，作用在同一条直线上。",
        ],
    },
    Doc {
        name: "动量守恒.md",
        pages: &[
            "# 动量与冲量\n\n动量等于质量乘以速度，p = mv，是矢量。冲量等于力乘以作用时间，冲量等于动量的变化量，这就是动量定理。\n\n## 动量守恒定律\n\n一个系统不受外力或所受合外力为零时，系统的总动量保持不变。碰撞和爆炸问题常用动量守恒定律求解。完全非弹性碰撞后两个物体以共同速度运动，动能有损失。",
        ],
    },
    Doc {
        name: "能量守恒.md",
        pages: &[
            "# 功和能\n\n功等于力与物体在力的方向上位移的乘积。动能等于二分之一质量乘以速度的平方。重力势能等于 mgh。\n\n## 机械能守恒\n\n只有重力或弹力做功时，物体的动能和势能相互转化，机械能的总量保持不变。摩擦力做功会把机械能转化为内能，这时机械能不守恒，但总能量仍然守恒。",
        ],
    },
];

/// The testkit's fixture documents, under the names they are added as.
pub(crate) fn fixtures() -> Vec<(&'static str, Vec<u8>)> {
    use deepsolve_testkit::documents;
    vec![
        ("lecture.pdf", documents::text_pdf(5)),
        ("积分.pdf", documents::chinese_pdf()),
        ("series.docx", documents::lecture_docx()),
        ("parts.html", documents::html_article().into_bytes()),
        (
            "linear-algebra-notes.md",
            documents::notes_markdown().into_bytes(),
        ),
    ]
}

pub(crate) const QUESTIONS: &[Question] = &[
    q(
        "What does the ratio test compare?",
        "series.docx",
        1,
        "lexical",
    ),
    q("l'Hopital's rule", "lecture.pdf", 3, "lexical"),
    q(
        "a worked example of improper integrals",
        "lecture.pdf",
        5,
        "lexical",
    ),
    q("the tabular method", "parts.html", 1, "lexical"),
    q("分部积分公式", "积分.pdf", 1, "lexical"),
    q("根式的积分用什么换元法？", "积分.pdf", 2, "lexical"),
    q(
        "What is the epsilon-delta definition of a limit?",
        "calculus.pdf",
        1,
        "lexical",
    ),
    q(
        "How does the squeeze theorem show sin(x)/x tends to 1?",
        "calculus.pdf",
        1,
        "lexical",
    ),
    q(
        "State the chain rule for the derivative of a composition",
        "calculus.pdf",
        2,
        "lexical",
    ),
    q(
        "Which functions are continuous but not differentiable?",
        "calculus.pdf",
        2,
        "lexical",
    ),
    q(
        "Compute the integral of x e^x by integration by parts",
        "calculus.pdf",
        3,
        "lexical",
    ),
    q(
        "What does the LIATE rule say about choosing u?",
        "calculus.pdf",
        3,
        "lexical",
    ),
    q(
        "What is the Lagrange remainder of a Taylor polynomial?",
        "calculus.pdf",
        4,
        "lexical",
    ),
    q(
        "How is the radius of convergence of a power series found?",
        "calculus.pdf",
        4,
        "lexical",
    ),
    q(
        "When are vectors linearly independent?",
        "linear-algebra.pdf",
        1,
        "lexical",
    ),
    q(
        "What is the dimension of a subspace?",
        "linear-algebra.pdf",
        1,
        "lexical",
    ),
    q(
        "When is a square matrix invertible?",
        "linear-algebra.pdf",
        2,
        "lexical",
    ),
    q(
        "How does swapping two rows change the determinant?",
        "linear-algebra.pdf",
        2,
        "lexical",
    ),
    q(
        "How do I diagonalize a matrix with its eigenvectors?",
        "linear-algebra.pdf",
        3,
        "lexical",
    ),
    q(
        "What does the spectral theorem say about symmetric matrices?",
        "linear-algebra.pdf",
        3,
        "lexical",
    ),
    q(
        "Explain the Gram-Schmidt process",
        "linear-algebra.pdf",
        4,
        "lexical",
    ),
    q(
        "What are the normal equations of least squares?",
        "linear-algebra.pdf",
        4,
        "lexical",
    ),
    q("State Bayes' theorem", "probability.pdf", 1, "lexical"),
    q(
        "Why does a test for a rare disease give false positives?",
        "probability.pdf",
        1,
        "lexical",
    ),
    q(
        "Is expectation linear for dependent variables?",
        "probability.pdf",
        2,
        "lexical",
    ),
    q(
        "What is the variance of a sum of independent variables?",
        "probability.pdf",
        2,
        "lexical",
    ),
    q(
        "What are the mean and variance of the Poisson distribution?",
        "probability.pdf",
        3,
        "lexical",
    ),
    q(
        "What does the central limit theorem say about the sample mean?",
        "probability.pdf",
        4,
        "lexical",
    ),
    q("什么是惯性？", "牛顿定律.md", 1, "lexical"),
    q("作用力和反作用力有什么关系？", "牛顿定律.md", 1, "lexical"),
    q("动量守恒定律的条件是什么？", "动量守恒.md", 1, "lexical"),
    q("机械能什么时候守恒？", "能量守恒.md", 1, "lexical"),
    q(
        "how close must the input be for the output to stay within a tolerance",
        "calculus.pdf",
        1,
        "paraphrase",
    ),
    q(
        "slope of the curve at one point",
        "calculus.pdf",
        2,
        "paraphrase",
    ),
    q(
        "approximating a function near a point by a polynomial",
        "calculus.pdf",
        4,
        "paraphrase",
    ),
    q(
        "best fit straight line through measurements",
        "linear-algebra.pdf",
        4,
        "paraphrase",
    ),
    q(
        "updating a belief after seeing evidence",
        "probability.pdf",
        1,
        "paraphrase",
    ),
    q(
        "counting rare events per hour",
        "probability.pdf",
        3,
        "paraphrase",
    ),
    q(
        "What is Newton's second law?",
        "牛顿定律.md",
        1,
        "cross-lingual",
    ),
    q(
        "momentum conservation in collisions",
        "动量守恒.md",
        1,
        "cross-lingual",
    ),
    q("中心极限定理", "probability.pdf", 4, "cross-lingual"),
    q("特征值和特征向量", "linear-algebra.pdf", 3, "cross-lingual"),
];

const fn q(text: &'static str, doc: &'static str, page: u32, kind: &'static str) -> Question {
    Question {
        text,
        doc,
        page,
        kind,
    }
}
