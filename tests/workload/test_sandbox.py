"""User templates render sandboxed and bounded: each escape or budget is one line naming the
file and line (these used to be the catch-all error, a hang, or code run under --dry-run)."""

from __future__ import annotations

import pytest
from bad_templates import template_error

from elastix.workload import render
from elastix.workload.spec import build_spec


def make_spec():
    return build_spec(None, {"name": "demo", "tpu_type": "v5litepod-16", "docker_image": "img:1",
                             "command": "python3 train.py"})


@pytest.mark.parametrize(("body", "message"), [
    ("a: 1\nb: {{ 1/0 }}\n", "line 2: ZeroDivisionError"),
    ('a: 1\n{% include "/etc/passwd" %}\n', "line 2: include is not allowed"),
    ('{% import "x.j2" as x %}\n', "line 1: import is not allowed"),
    ('{% extends "base.j2" %}\n', "line 1: extends is not allowed"),
    ('a: {{ "".__class__.__mro__ }}\n', "line 1: not allowed in a template"),
    ("a: {{ spec.__init__.__globals__ }}\n", "not allowed in a template"),
    ("a: {{ spec.env.update({'A': '1'}) }}\n", "not allowed in a template"),
    ("{% for i in range(10**9) %}x{% endfor %}\n", "line 1: range() is given 1000000000"),
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
     "line 1: loops ran over 1000000 iterations"),
    ("{% set a = range(100000)|list %}\n{% for i in a %}{% for j in a %}{% endfor %}"
     "{% endfor %}", "line 2: loops ran over"),
    ("{% for i in range(100000) %}{{ i ~ 'xxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}",
     "over 1048576 characters"),
    ("{% set s %}{% for i in range(100000) %}{{ i ~ 'xxxxxxxxxxxxxxxxxxx' }}{% endfor %}"
     "{% endset %}", "emits over 1048576 characters"),
    ("{% for i in range(100000) %}xxxxxxxxxxxxxxxxxxxxxxx{% endfor %}",
     "over 1048576 characters"),
    ("{% set s %}{% for i in range(100000) %}xxxxxxxxxxxxxxxxxxxxxxx{% endfor %}{% endset %}"
     "{{ s|length }}", "emits over 1048576 characters"),
    ("a: {{ 'x' * 10**9 }}\n", "line 1: repeating 1 items 1000000000 times"),
    ("a: {{ 10**(10**9) }}\n", "too large to compute"),
    ("a: {{ 'x'|center(10**9) }}\n", "filter center is given 1000000000"),
    ("a: {{ 'x'.ljust(10**9) }}\n", "ljust() is given 1000000000"),
    ("{% set a = 'x' * 1000000 %}{% set b = a ~ a %}{{ b|length }}", "builds a value of"),
    ("{% set a = 'x' * 1000000 %}{% set b = a + a %}{{ b|length }}", "builds a value of"),
    ("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "recursion too deep"),
    ("{% set a = 'x' * 1000000 %}{{ (a|replace('', a))|length }}", "filter replace would build"),
    ("{% set a = 'x' * 1000000 %}{{ a.replace('x', 'yy')|length }}", "replace() would build"),
    ("{% set a = [ 'x' * 1000] * 10000 %}{{ a|join|length }}", "filter join would build"),
    ("{% set a = [ 'x' * 1000] * 10000 %}{{ ''.join(a)|length }}", "join() would build"),
    ("{% set a = '\n' * 100000 %}{{ a|indent('x' * 100)|length }}", "filter indent would build"),
    ("a: {{ '%0999999999d' % 1 }}", "'%' has a field width over"),
    ("a: {{ '%.999999999f'|format(1) }}", "filter format has a field width over"),
    ("a: {{ '{:>999999999}'.format(1) }}", "format() has a field width over"),
    ("a: {{ nope }}\n", "line 1: uses an undefined value"),
])
def test_user_templates_are_sandboxed_and_bounded(tmp_path, body, message):
    t = tmp_path / "mine.j2"
    error = template_error(render.render_text, make_spec(), t, body)
    assert message in error.message
    assert error.message.startswith(f"template {t}")
    assert error.hint


def test_budgets_leave_ordinary_templates_alone(tmp_path):
    t = tmp_path / "mine.j2"
    t.write_text("{% for i in range(1000) %}{% for j in range(100) %}{% endfor %}{% endfor %}"
                 "{% for e in main_env %}{{ e.name }}{% if loop.last %}/{{ loop.length }}"
                 "{% endif %}{% endfor %}{{ 'ab' * 3 }}{{ 2 ** 10 }}{{ 'x'|center(9) }}"
                 "{{ 'a-b'|replace('-', '_') }}{{ ['a', 'b']|join(',') }}{{ '%05d' % 7 }}"
                 "{{ '{:>3}'.format(1) }}{{ 'id-1234567-%s' % 1 }}")
    out = render.render_text(make_spec(), t)
    assert out.endswith('"ELASTIX_NUM_SLICES"/6"ababab"1024"    x    ""a_b""a,b""00007""  1"'
                        '"id-1234567-1"')
