"""A step's text rewritten into plain arithmetic before its claims are looked for.

:func:`plain` applies, in this order (each rule is a kind of writing, not a list of strings):

1. markdown: ``**``, ``__``, backticks, ``*italics*``, a leading bullet (``-``, ``*``,
   ``•``, ``1.``, ``1)``, ``a)``), heading ``#`` or quote ``>`` are dropped; the pipes of a
   table row separate its cells; a parenthesized remark with a word, after a space (``= 4
   (15 minutes)``, ``(to 2 d.p.)``) or of words alone (``(sum)``), is dropped;
2. LaTeX layout: ``\\begin{..}``/``\\end{..}`` of any environment, the alignment ``&`` of
   ``align``/``aligned``/``eqnarray`` rows, row breaks ``\\\\`` (and their ``[2pt]``),
   ``\\tag{}``, ``\\label{}``, ``\\nonumber``; math delimiters ``\\(`` ``\\)`` ``\\[`` ``\\]``
   ``$$``, and ``$..$`` around math (a ``$`` before a number that is not math is money:
   ``$5``, ``\\$5``);
3. thousands written in LaTeX: ``1{,}500``, ``1\\,500``, ``1,\\!500`` -> ``1,500``;
4. LaTeX wrappers unwrapped: ``\\text{}``, ``\\mathrm{}``, ``\\textbf{}``, ``\\mathbf{}``,
   ``\\boxed{}``, ``\\operatorname{}`` (their words stay words, so ``\\text{ cm}`` is a unit);
5. LaTeX and Unicode math: ``\\frac{a}{b}``/``\\dfrac``/``\\tfrac``/``\\frac12`` ->
   ``((a)/(b))`` (``1 \\frac{1}{2}`` is the mixed number ``1 1/2``); ``\\sqrt{a}`` ->
   ``((a)^(1/2))``, ``\\sqrt[n]{a}`` -> ``((a)^(1/(n)))``, ``√a``; ``\\binom{n}{k}`` and
   ``{n \\choose k}`` -> ``n!/(k!(n-k)!)``; ``\\times \\cdot \\ast · ⋅ ×`` -> ``*``, ``\\div ÷``
   -> ``/``, ``−`` -> ``-``; ``²`` ``³`` -> ``^2`` ``^3``; ``½ ¼ ¾ ⅓ ⅔`` -> fractions;
   ``\\pi``/``π`` -> ``π`` (the constant); degrees ``^\\circ``, ``°``, ``\\degree`` -> the
   unit ``degree``; ``\\%`` -> ``%``; spacing (``\\,``, ``\\quad``, ``\\left``) dropped;
   ``\\ldots``/``\\dots``/``...``/``…`` -> ``…``; arrows (``\\Rightarrow``, ``\\implies``,
   ``\\to``, ``=>``, ``->``, ``→``) end an expression;
6. relations: ``\\approx ≈ \\simeq`` -> ``≈``; ``\\le \\leq \\leqslant ≤ <=`` -> ``≤``; ``\\ge
   \\geq \\geqslant ≥ >=`` -> ``≥``; ``\\lt``/``\\gt`` -> ``<``/``>``; ``\\ne \\neq ≠`` -> ``≠``;
7. number words (``numwords``): ``twenty-four`` -> ``24``, ``two thirds`` -> ``(2/3)``;
8. operator words: ``plus``, ``minus``, ``times``, ``multiplied by``, ``divided by``,
   ``squared``, ``cubed``, ``to the power of``, ``the square root of N``, ``twice N``;
9. relation words: ``is approximately``/``is about``
   -> ``≈``; ``is greater/more/larger than``, ``exceeds`` -> ``>``; ``is less/smaller/fewer
   than`` -> ``<``; ``is at least`` -> ``≥``; ``is at most`` -> ``≤``; ``is not equal to``
   -> ``≠``; and the *weak* ``equals``/``is equal to``/``is``/``are``/``gives``/``makes``/
   ``yields``/``results in`` (:data:`WEAK_EQ`), an ``=`` only when the expression on its left
   computes something (``24 / 3 is 8`` is a claim; ``box 2 is 5*3 = 15`` is not ``2 = 5*3``,
   ``40 nickels is equal to 40 x 5`` is a conversion, ``2/5 is equal to 12.8 hectares`` a
   portion: the claim reader's rules);
10. ``of`` after a fraction or percent, before a number, multiplies: ``2/5 of 30`` ->
    ``2/5 * 30``, ``20% of 50``, ``(2/3) of 30``; ``3 bags of 5 =`` -> ``3 * 5 =`` (only
    before an ``=``: "= 20 sets of 3 eggs" describes the result);
11. units: one or two words (``cm``, ``apples``, ``red apples``, ``km/h``, ``miles per hour``,
    ``cm^2``, ``cm²``) right after a number and before an operator or relation are replaced
    by one *unit mark* (a private-use character, :data:`UNIT_MARKS`) that names them in the
    returned unit table, so ``5 cm × 3 cm = 15 cm²`` reads ``5 ¤ * 3 ¤ = 15 ¤``.

Only the characters above reach the claim reader: every other word is masked by it.
"""

from __future__ import annotations

import re
from fractions import Fraction

from grpo.verifiers.steps.numwords import words_to_digits

__all__ = [
    "ANGLE",
    "ARGUMENT_SEPARATOR",
    "FUNCTIONS",
    "MONEY",
    "POISON",
    "UNIT_MARKS",
    "WEAK_EQ",
    "plain",
    "unit_names",
]

WEAK_EQ = "\x02"
"""Stands for a weak ``=`` (``is``, ``gives``): a claim only after a computation."""
POISON = "\x03"
"""Stands for what the reader cannot compute inside an expression (a function such as
``\\sin`` or ``f(3)``, a Greek letter, an unknown LaTeX command, ``|x|``, ``@``): it keeps the
expression in one piece, and a claim with a side holding it is unverifiable."""
MONEY = "\x01"
"""Stands for a ``$`` of money while LaTeX is rewritten (back to ``$`` at the end)."""
UNIT_MARKS = "\ue000-\uefff"
"""The range of unit marks (a regex class body): mark ``k`` is ``chr(0xE000 + k)``."""
FUNCTIONS = {
    "sin": "\uf000", "cos": "\uf001", "tan": "\uf002", "cot": "\uf003", "sec": "\uf004",
    "csc": "\uf005", "arcsin": "\uf006", "arccos": "\uf007", "arctan": "\uf008",
    "sinh": "\uf009", "cosh": "\uf00a", "tanh": "\uf00b", "ln": "\uf00c", "exp": "\uf00d",
    "lg": "\uf00e", "logbase": "\uf00f",
}  # fmt: skip
"""LaTeX functions the reader evaluates (with sympy), each written as one private-use
character followed by its parenthesized argument (``logbase`` takes ``(x, b)``). A bare
``\\log`` (base 10 or e?) is not among them."""
ARGUMENT_SEPARATOR = "\uf0fe"
"""Separates a function's arguments (a comma would split the claim reader's run)."""
ANGLE = "\uf0fd"
"""Follows a trigonometric argument written as a bare number (``\\sin 30``): degrees or
radians? The claim reader tries both readings (``*π/180`` and none)."""

_ARROW = " \x00 "  # ends an expression (the claim reader keeps no NUL in a run)

_MARKDOWN = re.compile(r"\*\*\*|\*\*|__|`")
_LEADING = re.compile(r"^\s*(?:#+\s+|>\s+|[-*•+]\s+|\d{1,3}[.)]\s+|[A-Za-z][.)]\s+(?=\S))+")
_ITALIC = re.compile(
    r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])"
    r"|(?<![\w\\])_(?=[^\s_])([^_\n]+?)(?<=[^\s_])_(?!\w)"
)
_ENV = re.compile(r"\\(?:begin|end)\s*\{[A-Za-z*]+\}(?:\s*\{(?:[^{}]|\{[^{}]*\})*\})?")
_ROW_BREAK = re.compile(r"\\\\(?:\s*\[[^\]]{0,12}\])?")
_LAYOUT = re.compile(r"\\(?:tag|label)\s*\{[^{}]*\}|\\(?:nonumber|notag)\b")
_DELIMITERS = re.compile(r"\\[()]")
_DISPLAY = re.compile(r"\\[\[\]]|\$\$")  # each display is an expression of its own
_MATH_SPAN = re.compile(r"\$(?=[^\s$])([^$]*?[^\s$\\])\$(?!\d)")  # pandoc's tex_math_dollars
_THOUSANDS_LATEX = re.compile(r"(?<=\d)(?:\{,\}|,\\!|\\!,\\!|\\,|\\;|\\ |~)(?=\d{3}(?!\d))")
_WRAPPER = re.compile(
    r"\\(?:text|textrm|textbf|textit|mathrm|mathbf|mathit|boxed|operatorname|emph|mbox|"
    r"hbox|fbox|textnormal|cancel|bcancel|xcancel|underline)\s*\{([^{}]*)\}"
)
_LETTER_UNITS = {
    "m": "metre", "g": "gram", "s": "second", "h": "hour", "L": "litre", "l": "litre",
    "K": "kelvin", "N": "newton", "J": "joule", "W": "watt", "V": "volt", "A": "ampere",
}  # fmt: skip
_TEXT_LETTER_UNIT = re.compile(
    r"\\(?:text|textrm|mathrm|mbox|operatorname)\s*\{\s*([" + "".join(_LETTER_UNITS) + r"])\s*\}"
)
_MIXED = re.compile(r"(?<![\d.])(\d+)\s*\\[dtc]?frac\s*\{(\d+)\}\s*\{(\d+)\}")
_FRAC = re.compile(r"\\[dtc]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_FRAC_SHORT = re.compile(r"\\[dtc]?frac\s*(\d)\s*(\d)")
_SQRT_N = re.compile(r"\\sqrt\s*\[([^\[\]{}]*)\]\s*\{([^{}]*)\}")
_SQRT = re.compile(r"\\sqrt\s*\{([^{}]*)\}")
_SQRT_SHORT = re.compile(r"\\sqrt\s*(\d+(?:\.\d+)?)")
_ROOT_SIGN = re.compile(r"√\s*(\d+(?:\.\d+)?|\([^()]*\))")
_BINOM_SHORT = re.compile(r"\\[dt]?binom\s*(\d)\s*(\d)")
_EXPONENT = re.compile(r"\^\s*\{([^{}]*)\}")
_BASE_NUMBER = re.compile(r"(?<![A-Za-z0-9.\\])([0-9A-Z]+)_(?:\{\s*(\d{1,2})\s*\}|(\d))(?!\d)")
_SUBSCRIPT = re.compile(r"_\s*(?:\{[^{}]*\}|\\?[A-Za-z0-9]+)")
_OVERLINE = re.compile(r"(\d*)\.(\d*)\\overline\s*\{(\d+)\}")
_BINOM = re.compile(r"\\[dt]?binom\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_CHOOSE = re.compile(r"\{\s*([^{}]*?)\s*\\choose\s*([^{}]*?)\s*\}")
_DEGREES = re.compile(
    r"(?:\^\s*\{?\s*\\circ\s*\}?|°|\\degree(?![A-Za-z]))"
    r"(?:\s*(?:\\(?:text|mathrm)\s*\{\s*[CF]\s*\}|[CF](?![A-Za-z])))?"
)
_SYMBOLS = (
    (re.compile(r"\\(?:times|cdot|ast)(?![A-Za-z])|[·⋅∗×]"), " * "),
    (re.compile(r"\\div(?![A-Za-z])|÷"), " / "),
    (re.compile(r"\\(?:approx|thickapprox|simeq|approxeq)(?![A-Za-z])|≈|≃"), " ≈ "),
    (re.compile(r"\\(?:leq|le|leqslant)(?![A-Za-z])|<=|≤|⩽"), " ≤ "),
    (re.compile(r"\\(?:geq|ge|geqslant)(?![A-Za-z])|>=|≥|⩾"), " ≥ "),
    (re.compile(r"\\(?:neq|ne)(?![A-Za-z])|≠"), " ≠ "),
    (re.compile(r"\\lt(?![A-Za-z])"), " < "),
    (re.compile(r"\\gt(?![A-Za-z])"), " > "),
    (re.compile(r"\\(?:Rightarrow|Longrightarrow|implies|to|rightarrow|iff)(?![A-Za-z])"), _ARROW),
    (re.compile(r"[⇒→⟹]|==>|=>|->"), _ARROW),
    (re.compile(r"\\pi(?![A-Za-z])"), " π "),
    (re.compile(r"\\(?:ldots|dots|cdots|dotsc|dotsb)(?![A-Za-z])|\.\.\.+|…"), "…"),
    (re.compile(r"\\%"), "%"),
    (re.compile(r"−|–"), "-"),
    (re.compile(r"²"), "^2"),
    (re.compile(r"³"), "^3"),
    (
        re.compile(
            r"\\(?:left|right|displaystyle|textstyle|big|Big|bigg|Bigg|quad|qquad)(?![A-Za-z])"
            r"|\\[,;!: ]"
        ),
        " ",
    ),
)
_VULGAR = {"½": "1/2", "¼": "1/4", "¾": "3/4", "⅓": "1/3", "⅔": "2/3", "⅛": "1/8"}
_VULGAR_RE = re.compile(r"(\d*)\s*([½¼¾⅓⅔⅛])")

_OPERATOR_WORDS = (
    (re.compile(r"\b(?:multiplied\s+by|times)\b", re.IGNORECASE), " * "),
    (re.compile(r"\bdivided\s+by\b", re.IGNORECASE), " / "),
    (re.compile(r"\b(?:plus|added\s+to)\b", re.IGNORECASE), " + "),
    (re.compile(r"\bminus\b", re.IGNORECASE), " - "),
    (re.compile(r"\s*\bsquared\b", re.IGNORECASE), "^2 "),
    (re.compile(r"\s*\bcubed\b", re.IGNORECASE), "^3 "),
    (re.compile(r"\s*\b(?:raised\s+)?to\s+the\s+power\s+of\b\s*", re.IGNORECASE), "^"),
    (
        re.compile(r"\s*\b(?:raised\s+)?to\s+the\s+(\d+)(?:st|nd|rd|th)\s+power\b", re.I),
        r"^\1 ",
    ),
)
_WORD_PAREN = re.compile(r"\(\s*[A-Za-z]{2,}[A-Za-z\s,.'-]*\)")  # "(sum)", "(in dollars)"
# "4 (15 minutes)", "2.24 (to 2 d.p.)": after a space, a remark; "2(21 inches)" is a factor
_REMARK_PAREN = re.compile(r"(?<=\s)\((?=[^()]*[A-Za-z]{2})[A-Za-z\d\s,.'-]*\)")
_PERCENT_WORD = re.compile(r"(\d+(?:\.\d+)?)\s*(?:percent|per\s+cent|pct)\b", re.IGNORECASE)
_N = r"(\$?\s*\d+(?:\.\d+)?%?|\([^()]*\))"
_PHRASES = [  # each operand whole: not part of a longer expression ("8 more than 15*2")
    (
        keyword,
        re.compile(r"(?<![-+*/^\d.)]\s)(?<![-+*/^\d.)])" + p + r"(?!\s*[-+*/^\d(])", re.IGNORECASE),
        r,
    )
    for keyword, p, r in (
        ("sum", r"\b(?:the\s+)?sum\s+of\s+" + _N + r"\s+and\s+" + _N, r"(\1 + \2)"),
        ("product", r"\b(?:the\s+)?product\s+of\s+" + _N + r"\s+and\s+" + _N, r"(\1 * \2)"),
        (
            "difference",
            r"\b(?:the\s+)?difference\s+(?:between|of)\s+" + _N + r"\s+and\s+" + _N,
            r"(\1 - \2)",
        ),
        (
            "quotient",
            r"\b(?:the\s+)?quotient\s+of\s+" + _N + r"\s+(?:and|by)\s+" + _N,
            r"(\1 / \2)",
        ),
        ("subtracted", _N + r"\s+subtracted\s+from\s+" + _N, r"(\2 - \1)"),
        ("by", _N + r"\s+(?:increased|raised)\s+by\s+" + _N, r"(\1 + \2)"),
        ("by", _N + r"\s+(?:decreased|reduced)\s+by\s+" + _N, r"(\1 - \2)"),
        ("than", _N + r"\s+(?:more|greater)\s+than\s+" + _N, r"(\2 + \1)"),
        ("than", _N + r"\s+(?:less|fewer)\s+than\s+" + _N, r"(\2 - \1)"),
    )
]
_ROOTS = {"square": 2, "cube": 3, "fourth": 4, "fifth": 5}
_ROOT_WORDS = re.compile(
    r"\b(?:the\s+)?(square|cube|fourth|fifth)\s+root\s+of\s+(\d+(?:\.\d+)?|\([^()]*\))",
    re.IGNORECASE,
)
_WHICH_IS = re.compile(  # "7/9 which is 0.78"; after a comma "which" may mean something else
    r"(?<=[\d)%])\s+(?:which|that)\s+(?=(?:is|equals|gives|makes|comes|results)\b)",
    re.IGNORECASE,
)
_TWICE = re.compile(r"\btwice\s+(?=[\d(])", re.IGNORECASE)
_RELATION_WORDS = (
    (r"is\s+not\s+equal\s+to|does\s+not\s+equal|isn't\s+equal\s+to|is\s+not", " ≠ "),
    (r"(?:is\s+)?(?:greater|more|larger|bigger)\s+than\s+or\s+equal\s+to|is\s+at\s+least"
     r"|is\s+no\s+less\s+than", " ≥ "),
    (r"(?:is\s+)?(?:less|smaller|fewer)\s+than\s+or\s+equal\s+to|is\s+at\s+most"
     r"|is\s+no\s+more\s+than", " ≤ "),
    (r"is\s+(?:greater|more|larger|bigger|higher)\s+than|exceeds", " > "),
    (r"is\s+(?:less|smaller|fewer|lower)\s+than", " < "),
    (r"(?:is|equals|are)\s+(?:approximately|approx\.?|about|roughly|around|nearly)"
     r"|approximately\s+equals|is\s+approximately\s+equal\s+to", " ≈ "),
    (r"(?:is|are|was)\s+equal\s+to|equal\s+to|equals|equaled|equalled|is|are|was|gives|give"
     r"|makes|make|yields|results\s+in|comes\s+to|becomes", f" {WEAK_EQ} "),
)  # fmt: skip
_RELATION_WORD_RE = re.compile(
    r"(?<![A-Za-z'])(?:"
    + "|".join(f"(?P<r{k}>{words})" for k, (words, _) in enumerate(_RELATION_WORDS))
    + r")(?![A-Za-z'])",
    re.IGNORECASE,
)
_RELATION_REPL = {f"r{k}": repl for k, (_, repl) in enumerate(_RELATION_WORDS)}
_OPERATOR_KEYWORDS = (
    ("multiplied", "times"), ("divided",), ("plus", "added"), ("minus",), ("squared",),
    ("cubed",), ("power",), ("power",),
)  # fmt: skip


_FRACTION_OF = re.compile(
    r"((?:\d+(?:\.\d+)?\s*/\s*\d+(?:\.\d+)?|\([^()]*/[^()]*\)"
    r"|\(\s*\([^()]*\)\s*/\s*\([^()]*\)\s*\)|\d+(?:\.\d+)?\s*%))\s+of\s+"
    r"(?=[$" + MONEY + r"]?\s*[\d(])",
    re.IGNORECASE,
)
_GROUPS_OF = re.compile(r"(\d+(?:\.\d+)?)\s+[A-Za-z]{2,}\s+of\s+(\$?\d+(?:\.\d+)?)(?=\s*=)")

_STOP_WORDS = frozenset(
    [
        "and",
        "or",
        "so",
        "then",
        "the",
        "a",
        "an",
        "of",
        "to",
        "for",
        "each",
        "is",
        "are",
        "was",
        "were",
        "which",
        "that",
        "this",
        "it",
        "with",
        "by",
        "from",
        "on",
        "at",
        "as",
        "in",
        "if",
        "but",
        "we",
        "you",
        "he",
        "she",
        "they",
        "there",
        "here",
        "more",
        "less",
        "fewer",
        "total",
        "left",
        "remaining",
        "extra",
        "additional",
        "altogether",
        "together",
        "overall",
        "all",
        "only",
        "than",
        "not",
        "no",
        "now",
        "also",
        "into",
        "since",
        "because",
        "thus",
        "hence",
        "therefore",
        "gives",
        "makes",
        "yields",
        "equals",
        "step",
    ]
)
_UNIT_WORD = (
    r"(?:per\s+)?(?:[A-Za-z]+\s*/\s*[A-Za-z]+|[A-Za-z]{2,}(?:\s+per\s+[A-Za-z]+)?)"
    r"(?:\s*\^\s*\(?\d\)?)?"
)
_UNIT_AFTER_NUMBER = re.compile(
    r"(?<=[\d%)])(\s*)(" + _UNIT_WORD + r"(?:\s+" + _UNIT_WORD + r")?)"
    r"(?=\s*(?:[-+*/=≈<>≤≥≠)]|" + WEAK_EQ + r"|$|[.,;:!?](?:\s|$)))"
)
_LETTER_UNIT_AFTER_NUMBER = re.compile(  # "1.5 L", "5 s", "3 m": after a number and a space
    r"(?<=\d)\s+([mgshLl])(?=\s*(?:[-+*/=≈<>≤≥≠]|" + WEAK_EQ + r"|$|[.,;:!?](?:\s|$)))"
)
_SYNONYMS = {
    "hr": "hour", "hrs": "hour", "h": "hour", "min": "minute", "mins": "minute",
    "sec": "second", "secs": "second", "s": "second", "usd": "dollar", "buck": "dollar",
    "cts": "cent", "¢": "cent",
    "eur": "dollar", "gbp": "dollar", "inr": "dollar", "kms": "km", "lbs": "lb", "ft": "foot",
    "feet": "foot",
    "inches": "inch", "dollars": "dollar", "degrees": "degree", "mph": "mile/hour",
    "m": "metre", "meter": "metre", "meters": "metre", "metres": "metre", "g": "gram",
    "l": "litre", "liter": "litre", "liters": "litre", "litres": "litre",
}  # fmt: skip


def unit_names(phrase: str) -> frozenset[str]:
    """The normalized names of a unit phrase: lower case, singular, synonyms merged, a
    compound (``km/h``, ``miles per hour``) split into its parts, exponents dropped."""
    names: set[str] = set()
    for part in re.split(r"\s*(?:/|\bper\b)\s*|\s+", re.sub(r"\^\s*\(?\d\)?", "", phrase)):
        word = part.strip().lower()
        if not word or word in ("sq", "square", "cubic", "cu"):
            continue
        word = _SYNONYMS.get(word, word)
        if "/" in word:
            names.update(word.split("/"))
            continue
        if word.endswith("ies") and len(word) > 4:
            word = word[:-3] + "y"
        elif word.endswith(("ches", "shes", "xes", "sses")):
            word = word[:-2]
        elif word.endswith("s") and not word.endswith("ss") and len(word) > 2:
            word = word[:-1]
        names.add(_SYNONYMS.get(word, word))
    return frozenset(names)


def _unwrap_all(pattern: re.Pattern[str], repl: str, text: str) -> str:
    for _ in range(4):  # nested one inside another: innermost first
        new = pattern.sub(repl, text)
        if new == text:
            break
        text = new
    return text


_LETTER = re.compile(r"[A-Za-z]")
_SPACING = re.compile(
    r"\\(?:hspace|vspace|phantom|hphantom|vphantom)\s*\{[^{}]*\}|\\(?:cline|hline)(?:\s*\{[^{}]*\})?"
)
_COMMAND = re.compile(r"\\[A-Za-z]+|\\\|")
_ODD_SYMBOL = re.compile(r"[@#|∘⊕⊗⋆★⊙∣‖∞]")
_FUNCTION_CALL = re.compile(r"(?<![A-Za-z])[A-Za-z](?='*(?:\^\s*(?:\([^()]*\)|[-\w]+))?\()")
_CURRENCY = re.compile(
    r"[€£¥₹]|\\(?:euro|texteuro|pounds|textsterling|yen|textyen)(?![A-Za-z])\s*"
    r"|\b(?:USD|EUR|GBP|INR|JPY|CAD|AUD|CHF|CNY|Rs\.?|US\$)\s*(?=\d)"
)
_FACTORIAL_PRODUCT = re.compile(r"!\s*(?=[\d(])")
_LATEX_ANY = re.compile(r"[\\{}&°]")
_DEGREE_PLAIN = re.compile(r"°\s*[CF]?(?![A-Za-z])")
_SYMBOL_ANY = re.compile(r"[\\·⋅∗×÷≈≃≤≥⩽⩾≠<>⇒→⟹…−–²³]|\.\.\.|->|=>")


def _latex(text: str) -> str:
    if "\\log" in text:
        text = _LOG_BASE.sub(lambda m: "\\logbase{" + (m.group(1) or m.group(2)) + "} ", text)
    if "_" in text:
        text = _BASE_NUMBER.sub(_base_number, text)
        # x_1, a_{n+1}, \alpha_2: an indexed variable (j_1 / j_2 is not j / j)
        text = _SUBSCRIPT.sub(POISON, text)
    if _CURRENCY.search(text):
        text = _CURRENCY.sub(MONEY, text)
    if "$" in text:
        text = text.replace("\\$", MONEY)
        text = _DISPLAY.sub(_ARROW, text)
        text = _MATH_SPAN.sub(lambda m: f" {m.group(1)} ", text)  # $8 \cdot 2 = 16$; $5: money
        text = text.replace("$", MONEY)
    if _LATEX_ANY.search(text):
        text = _latex_markup(text)
    if "°" in text:
        text = _DEGREE_PLAIN.sub("°", text)
    if _SYMBOL_ANY.search(text):
        for pattern, repl in _SYMBOLS:
            text = pattern.sub(repl, text)
    if "√" in text or any(c in text for c in _VULGAR):
        text = _VULGAR_RE.sub(
            lambda m: (
                f"({m.group(1)}+{_VULGAR[m.group(2)]})"
                if m.group(1)
                else f"({_VULGAR[m.group(2)]})"
            ),
            text,
        )
        text = _ROOT_SIGN.sub(r"((\1)^(1/2))", text)
    text = text.replace("{", "(").replace("}", ")")
    if "\\" in text:
        text = _SPACING.sub(" ", text)
        if _FUNCTION_NAME.search(text):
            text = _functions(text)
        text = _COMMAND.sub(POISON, text)  # a function, a Greek letter, any other command
    if "°" in text:
        text = text.replace("°", " ")  # degrees outside a function: both sides carry them
    text = text.replace("~", " ")
    if _ODD_SYMBOL.search(text):
        text = _ODD_SYMBOL.sub(POISON, text)  # |x|, a @ b, ∞: not arithmetic the reader has
    if "(" in text:
        text = _FUNCTION_CALL.sub(POISON, text)  # f(3), p(x): a function, not a product
    if "!" in text:
        text = _FACTORIAL_PRODUCT.sub("!*", text)  # 3!\,2!: a product of factorials
    return text


_FUNCTION_NAME = re.compile(
    r"\\(" + "|".join(sorted(FUNCTIONS, key=len, reverse=True)) + r")(?![A-Za-z])"
)
_LOG_BASE = re.compile(r"\\log\s*_\s*(?:\{\s*(\d+(?:\.\d+)?)\s*\}|(\d))")
_FUNCTION_POWER = re.compile(r"\s*\^\s*(\(\s*-?\d+\s*\)|\d)")
_SIMPLE_ARGUMENT = re.compile(r"\s*(\d+(?:\.\d+)?\s*°?(?:\s*π)?|\d*\s*π|[A-Za-z](?![A-Za-z]))")
_DEGREE_NUMBER = re.compile(r"(\d+(?:\.\d+)?)\s*°")
_TRIG = frozenset(("sin", "cos", "tan", "cot", "sec", "csc"))
_BARE_NUMBER = re.compile(r"\s*-?\d+(?:\.\d+)?\s*")


_MAX_NESTED_CALLS = 8  # \sin(\sin(...)) deeper than this is not read


def _group_end(text: str, start: int) -> int:
    """Index just past the parenthesized group opening at ``text[start]``, or -1."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def _functions(text: str, depth: int = 0) -> str:
    """``\\sin 30°`` -> ``F(30*π/180)``, ``\\ln(2)^2``, ``\\sin^2 x`` -> ``(F(x))^2``,
    ``\\logbase(2) 8`` -> ``F(8, 2)``; a function whose argument cannot be told is POISON."""
    out: list[str] = []
    pos = 0
    for m in _FUNCTION_NAME.finditer(text):
        if m.start() < pos:
            continue
        out.append(text[pos : m.start()])
        name, i = m.group(1), m.end()
        extra = ""
        if name == "logbase":
            end = _group_end(text, i) if text.startswith("(", i) else -1
            if end < 0:
                out.append(POISON)
                pos = i
                continue
            extra, i = ARGUMENT_SEPARATOR + text[i + 1 : end - 1], end
        power = _FUNCTION_POWER.match(text, i)
        if power is not None:
            i = power.end()
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == "(" and (end := _group_end(text, i)) > 0:
            argument, pos = text[i + 1 : end - 1], end
        elif (simple := _SIMPLE_ARGUMENT.match(text, i)) is not None:
            argument, pos = simple.group(1), simple.end()
        else:
            out.append(POISON)
            pos = i
            continue
        if _FUNCTION_NAME.search(argument):
            if depth >= _MAX_NESTED_CALLS:
                out.append(POISON)
                continue
            argument = _functions(argument, depth + 1)  # \exp(\exp(2)): inner calls too
        argument = _DEGREE_NUMBER.sub(r"(\1*π/180)", argument)
        if name in _TRIG and _BARE_NUMBER.fullmatch(argument):
            argument = f"{argument.strip()}{ANGLE}"  # \sin 30: degrees or radians
        call = f"{FUNCTIONS[name]}({argument}{extra})"
        out.append(f" ({call})^{power.group(1)} " if power is not None else f" {call} ")
    out.append(text[pos:])
    return "".join(out)


def _base_number(m: re.Match[str]) -> str:
    """``110_2`` -> ``6``; digits not valid in the base (``9_8``) are not a number."""
    base = int(m.group(2) or m.group(3))
    try:
        if 2 <= base <= 36:
            return str(int(m.group(1), base))
    except ValueError:
        pass
    return POISON


def _repeating(m: re.Match[str]) -> str:
    """``0.1\\overline{6}`` -> ``(1/6)``: the exact value of a repeating decimal."""
    whole, fixed, period = m.group(1) or "0", m.group(2), m.group(3)
    value = Fraction(int(whole)) + Fraction(int(fixed or "0"), 10 ** len(fixed))
    value += Fraction(int(period), 10 ** len(fixed) * (10 ** len(period) - 1))
    return f"({value.numerator}/{value.denominator})"


def _latex_markup(text: str) -> str:
    text = _ENV.sub(" ", text)
    text = _ROW_BREAK.sub(" ", text)
    text = _LAYOUT.sub(" ", text)
    text = text.replace("&", " ")
    text = _DELIMITERS.sub(" ", text)
    text = _DISPLAY.sub(_ARROW, text)
    text = _THOUSANDS_LATEX.sub(",", text)
    if "overline" in text:
        text = _OVERLINE.sub(_repeating, text)
    text = _TEXT_LETTER_UNIT.sub(lambda m: f" {_LETTER_UNITS[m.group(1)]} ", text)
    text = _unwrap_all(_WRAPPER, r" \1 ", text)
    text = _DEGREES.sub("°", text)
    text = _MIXED.sub(r"\1 \2/\3", text)  # 1 \frac{1}{2}: the mixed number 1 1/2
    text = _FRAC_SHORT.sub(r"((\1)/(\2))", text)
    text = _SQRT_SHORT.sub(r"((\1)^(1/2))", text)
    text = _BINOM_SHORT.sub(r"((\1)!/((\2)!*((\1)-(\2))!))", text)
    for _ in range(6):  # innermost braces first: exponents, then fractions and roots
        new = _EXPONENT.sub(r"^(\1)", text)
        new = _FRAC.sub(r"((\1)/(\2))", new)
        new = _SQRT_N.sub(r"((\2)^(1/(\1)))", new)
        new = _SQRT.sub(r"((\1)^(1/2))", new)
        new = _BINOM.sub(r"((\1)!/((\2)!*((\1)-(\2))!))", new)
        new = _CHOOSE.sub(r"((\1)!/((\2)!*((\1)-(\2))!))", new)
        if new == text:
            break
        text = new
    return text


def _words(text: str) -> str:
    if not _LETTER.search(text):
        return text
    text = _WORD_PAREN.sub(" ", text)
    text = _REMARK_PAREN.sub(" ", text)
    text = words_to_digits(text)
    text = _WHICH_IS.sub(" ", text)
    if _PERCENT_WORD.search(text):
        text = _PERCENT_WORD.sub(r"\1%", text)
    lower = text.lower()
    for keyword, pattern, repl in _PHRASES:
        if keyword in lower:
            text = pattern.sub(repl, text)
    if "root" in text:
        text = _ROOT_WORDS.sub(lambda m: f"(({m.group(2)})^(1/{_ROOTS[m.group(1).lower()]}))", text)
    if "wice" in text:
        text = _TWICE.sub("2 * ", text)
    lower = text.lower()
    for keywords, (pattern, repl) in zip(_OPERATOR_KEYWORDS, _OPERATOR_WORDS, strict=True):
        if any(k in lower for k in keywords):
            text = pattern.sub(repl, text)
    text = _RELATION_WORD_RE.sub(lambda m: _RELATION_REPL[m.lastgroup or ""], text)
    if " of" in text:
        text = _FRACTION_OF.sub(r"\1 * ", text)
        text = _GROUPS_OF.sub(r"\1 * \2", text)
    return text


def _units(text: str, math: bool) -> tuple[str, list[frozenset[str]]]:
    table: list[frozenset[str]] = []
    if not math and _LETTER.search(text):  # in LaTeX math a lone letter is a variable
        text = _LETTER_UNIT_AFTER_NUMBER.sub(lambda m: f" {_LETTER_UNITS[m.group(1)]} ", text)

    def mark(m: re.Match[str]) -> str:
        phrase = m.group(2)
        if math and not m.group(1):
            return m.group(0)  # "\frac{1}{3}Bh", "8xyz": letters on a number are variables
        words = [w.lower() for w in re.findall(r"[A-Za-z]+", phrase)]
        if any(w in _STOP_WORDS for w in words) or len(table) >= 0x1000:
            return m.group(0)
        table.append(unit_names(phrase))
        return f" {chr(0xE000 + len(table) - 1)} "

    return _UNIT_AFTER_NUMBER.sub(mark, text), table


def plain(step: str) -> tuple[str, list[frozenset[str]]]:
    """Rewrite one step into plain arithmetic (rules in the module docstring).

    Args:
        step: the text of one step.

    Returns:
        The rewritten text, and the unit table: mark ``chr(0xE000 + k)`` in the text stands
        for the unit names ``table[k]``. The text keeps ``$`` for money.
    """
    math = "\\" in step or bool(_MATH_SPAN.search(step))
    text = _MARKDOWN.sub(" ", step)
    if text.lstrip().startswith("|"):  # a markdown table row: its pipes separate cells
        text = text.replace("|", _ARROW)
    text = _LEADING.sub(" ", text)
    if "*" in text or "_" in text:
        text = _ITALIC.sub(lambda m: f" {m.group(1) or m.group(2)} ", text)
    text = _latex(text)
    text = _words(text)
    text, table = _units(text, math)
    return text.replace(MONEY, "$"), table
