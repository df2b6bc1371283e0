"""The sandbox user templates render in: Jinja2's, with no loader and with budgets.

A user's ``--template`` is code, and it runs even under ``--dry-run``. Jinja2's immutable sandbox
keeps it from Python internals and from mutating the values it is given; on top of that a
template is one file (``include``, ``import`` and ``extends`` are refused at parse time) and is
bounded: loop iterations over all loops, characters emitted (``{{ }}`` values, and a loop's literal
text on each iteration) and rendered, the size of values built by ``*``, ``**``, ``+``, ``%``,
``~``, ``replace``, ``join``, ``indent`` and format widths, and integers given to filters and
methods as widths. Any failure while rendering is one :class:`TemplateProblem` line naming the
file and line.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range

from elastix.errors import ElastixError, ManifestError

# A JobSet manifest is far below these (the API server stores at most about 1.5 MB per object).
MAX_OUTPUT = 1 << 20
"""Characters a render may emit, and the size of any one string or list it builds."""
MAX_LOOP_ITERATIONS = 1_000_000
"""``{% for %}`` iterations per render, over every loop (nested loops multiply)."""
MAX_INT_BITS = 1 << 16
"""Bits of an integer a template may compute (``10**10**9`` would take minutes)."""
_NOT_ALLOWED = ("Include", "Import", "FromImport", "Extends")


class BudgetExceeded(ManifestError):
    """A template went over a render budget (loop iterations, output or value size)."""


def _sized(value: Any, what: str) -> Any:
    if isinstance(value, (str, bytes, list, tuple, dict)) and len(value) > MAX_OUTPUT:
        raise BudgetExceeded(f"{what} builds a value of {len(value)} items, over the "
                             f"{MAX_OUTPUT} allowed")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise BudgetExceeded(f"{what} builds an integer of {value.bit_length()} bits, over the "
                             f"{MAX_INT_BITS} allowed")
    return value


def _check_args(args: tuple, kwargs: dict, what: str) -> None:
    """Reject widths and counts no manifest needs ("x"|center(10**9) would allocate 1 GB)."""
    for a in (*args, *kwargs.values()):
        if isinstance(a, int) and not isinstance(a, bool) and abs(a) > MAX_OUTPUT:
            raise BudgetExceeded(f"{what} is given {a}, over the {MAX_OUTPUT} allowed")


# A printf or str.format field with a width or precision of 7 digits or more.
_WIDE_FIELD = re.compile(r"%[-#0 +]*(\d{7,}|\d*\.\d{7,})|\{[^{}]*:[^{}]*?\d{7,}[^{}]*\}")


def _check_growth(name: str, subject: Any, args: tuple, what: str) -> None:
    """Operations whose result can be far larger than their inputs, checked before they run:
    ``replace`` and ``indent`` (per match or line), ``join`` (every item), format widths."""
    size = None
    if name == "replace" and isinstance(subject, str) and len(args) >= 2 \
            and isinstance(args[0], str) and isinstance(args[1], str):
        matches = subject.count(args[0]) if args[0] else len(subject) + 1
        size = len(subject) + matches * len(args[1])
    elif name == "indent" and isinstance(subject, str) and args and isinstance(args[0], str):
        size = len(subject) + (subject.count("\n") + 1) * len(args[0])
    elif name == "join" and isinstance(subject, (list, tuple)):
        size = sum(len(x) if isinstance(x, str) else 20 for x in subject)
    elif name in ("format", "format_map", "%") and isinstance(subject, str) \
            and _WIDE_FIELD.search(subject):
        raise BudgetExceeded(f"{what} has a field width over the {MAX_OUTPUT} characters allowed")
    if size is not None and size > MAX_OUTPUT:
        raise BudgetExceeded(f"{what} would build about {size} characters, over the "
                             f"{MAX_OUTPUT} allowed")


def _bounded_filter(name: str, fn: Any) -> Any:
    skip = 2 if getattr(fn, "jinja_pass_arg", None) else 1  # the context and the value

    @functools.wraps(fn)  # keeps jinja's pass_context/pass_environment marker
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _check_args(args[skip:], kwargs, f"filter {name}")
        if len(args) >= skip:
            _check_growth(name, args[skip - 1], args[skip:], f"filter {name}")
        return _sized(fn(*args, **kwargs), f"filter {name}")

    return wrapper


class Sandbox(ImmutableSandboxedEnvironment):
    """Jinja2's sandbox (no Python internals, no mutation) plus budgets on size and loops."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, encode: Callable[[Any], str], **kwargs: Any) -> None:
        """Args:
        encode: what every ``{{ }}`` value becomes (``finalize``), before it is counted.
        kwargs: as ``jinja2.Environment``.
        """
        super().__init__(**kwargs)
        self.iterations = 0
        self.emitted = 0
        self.encode = encode
        self.finalize = self.emit
        self.filters = {name: _bounded_filter(name, fn) for name, fn in self.filters.items()}
        self.filters["_elastix_loop"] = self.count_loop
        self.filters["_elastix_sized"] = lambda v: _sized(v, "'~'")
        self.globals["range"] = _range

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _check_growth(operator, left, (), f"'{operator}'")
        ints = all(isinstance(x, int) for x in (left, right))
        if operator == "**" and ints and right > 0 and abs(left) > 1 \
                and left.bit_length() * right > MAX_INT_BITS:
            raise BudgetExceeded(f"{left} ** {right} is too large to compute")
        if operator == "*" and not ints:
            seq, n = (left, right) if isinstance(right, int) else (right, left)
            if isinstance(n, int) and hasattr(seq, "__len__") and len(seq) * n > MAX_OUTPUT:
                raise BudgetExceeded(f"repeating {len(seq)} items {n} times is over the "
                                     f"{MAX_OUTPUT} allowed")
        return _sized(super().call_binop(context, operator, left, right), f"'{operator}'")

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        name = getattr(__obj, "__name__", "a call")
        _check_args(args, kwargs, f"{name}()")
        if name == "join":  # sep.join(items): the items are what grows
            _check_growth(name, args[0] if args else None, (), f"{name}()")
        else:
            bound = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
            _check_growth(name, getattr(bound, "__self__", None), args, f"{name}()")
        return _sized(super().call(__context, __obj, *args, **kwargs),
                      f"{getattr(__obj, '__name__', 'a call')}()")

    def count_loop(self, iterable: Any, text: int) -> Iterator[Any]:
        """Every ``{% for %}`` iterates through this: ``text`` is the literal text in its body,
        charged per iteration (text captured by ``{% set %}`` never reaches :meth:`emit`)."""
        for item in iterable:
            self.iterations += 1
            if self.iterations > MAX_LOOP_ITERATIONS:
                raise BudgetExceeded(f"loops ran over {MAX_LOOP_ITERATIONS} iterations")
            self.charge(text)
            yield item

    def charge(self, size: int) -> None:
        self.emitted += size
        if self.emitted > MAX_OUTPUT:
            raise BudgetExceeded(f"the template emits over {MAX_OUTPUT} characters")

    def emit(self, value: Any) -> str:
        """``finalize``: every ``{{ }}`` value, in the output or captured by set/macro blocks."""
        text = self.encode(value)
        self.charge(len(text))
        return text


def _range(*args: int) -> range:
    """The sandbox's ``range`` (at most 100000 items), under the name templates call it by."""
    return safe_range(*args)


_range.__name__ = "range"  # error messages name what the template wrote


def _compile(env: Sandbox, source: str, name: str) -> jinja2.Template:
    """Parse, refuse other files, and put every loop and ``~`` under the budget."""
    from jinja2 import nodes

    ast = env.parse(source)
    for kind in _NOT_ALLOWED:
        for node in ast.find_all(getattr(nodes, kind)):
            raise TemplateProblem(name, node.lineno,
                                  f"{kind.lower()} is not allowed: a template is one file",
                                  "paste what it would include into the template")
    for loop in list(ast.find_all(nodes.For)):
        text = sum(len(t.data) for n in loop.body for t in n.find_all(nodes.TemplateData))
        loop.iter = nodes.Filter(loop.iter, "_elastix_loop", [nodes.Const(text)], [], None, None,
                                 lineno=loop.lineno)
    for concat in list(ast.find_all(nodes.Concat)):
        wrapped = nodes.Concat(concat.nodes, lineno=concat.lineno)
        concat.nodes = [nodes.Filter(wrapped, "_elastix_sized", [], [], None, None,
                                     lineno=concat.lineno)]
    return env.from_string(ast)


class TemplateProblem(ManifestError):
    """A template that cannot render: names the file and line, when known."""

    def __init__(self, name: str, line: int | None, what: str, hint: str | None) -> None:
        where = f"{name} line {line}" if line else name
        super().__init__(f"template {where}: {what}", hint=hint)


def _template_line(err: BaseException) -> int | None:
    """The template line the error was raised on (jinja puts template frames in tracebacks)."""
    line = None
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def render(env: Sandbox, source: str, name: str, values: dict[str, Any], *, trusted: bool,
           variables_hint: str | None = None) -> str:
    """Compile and render ``source`` within the budgets.

    Args:
        env: a fresh :class:`Sandbox` (its budgets are spent by this render).
        name: the template's name in messages (the user's path).
        trusted: our own template: an error that is not an elastix error is a bug, re-raised.
        variables_hint: the hint for an undefined variable (what a template can use).

    Raises:
        ManifestError: the template does not parse or fails while rendering, naming the file and
            line; a budget is exceeded.
    """
    try:
        tmpl = _compile(env, source, name)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateProblem(name, e.lineno, f"syntax error: {e.message}",
                              "fix the Jinja2 syntax in the template") from None
    out: list[str] = []
    size = 0
    try:
        for chunk in tmpl.generate(values):
            size += len(chunk)
            if size > MAX_OUTPUT:
                raise BudgetExceeded(f"the template renders over {MAX_OUTPUT} characters")
            out.append(chunk)
    except (jinja2.TemplateError, ManifestError, ArithmeticError, LookupError, TypeError,
            ValueError, AttributeError, RecursionError, MemoryError) as e:
        if trusted and not isinstance(e, ElastixError):
            raise  # our own template failing is a bug, not the user's input
        raise _explain(e, name, variables_hint) from None
    return "".join(out)


def _explain(err: BaseException, name: str, variables_hint: str | None) -> ManifestError:
    """One line for a template failing mid-render: which file and line, and what went wrong."""
    line = _template_line(err)
    if isinstance(err, TemplateProblem):
        return err
    if isinstance(err, BudgetExceeded):
        return TemplateProblem(name, line, err.message,
                               "templates are bounded: render a JobSet, not a computation")
    if isinstance(err, ManifestError):
        return TemplateProblem(name, line, err.message, err.hint)
    if isinstance(err, jinja2.UndefinedError):
        return TemplateProblem(name, line, f"uses an undefined value: {err.message}",
                               variables_hint)
    if isinstance(err, jinja2.exceptions.SecurityError):
        return TemplateProblem(name, line, f"not allowed in a template: {err}",
                               "templates are sandboxed: use the variables, filters and tests "
                               "Jinja2 provides")
    if isinstance(err, RecursionError):
        return TemplateProblem(name, line, "recursion too deep",
                               "templates are bounded: render a JobSet, not a computation")
    if isinstance(err, MemoryError):
        return TemplateProblem(name, line, "ran out of memory",
                               "templates are bounded: render a JobSet, not a computation")
    return TemplateProblem(name, line, f"{type(err).__name__}: {err}",
                           "fix the expression on that line")
