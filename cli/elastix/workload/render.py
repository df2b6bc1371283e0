"""Render a WorkloadSpec to a JobSet manifest: ``render(spec) -> dict``, pure and offline.

Safety rule: every ``{{ expression }}`` in a template (ours or a user's ``--template``) is emitted
as JSON through the environment's ``finalize`` hook, whether or not the template author remembered
a filter. JSON scalars, lists and objects are valid YAML flow nodes, so a value can never add a
key, end a block or inject a document: commands and env values with quotes, newlines, ``: ``,
``#``, ``{{ }}`` or any unicode round-trip exactly. Characters YAML treats as line breaks or as
non-printable (U+0085, U+2028, U+2029, C1 controls, BOM) are escaped as ``\\uXXXX``.

Templates render in Jinja2's immutable sandbox, with no loader (a template is one file) and under
budgets (loop iterations, output size, the size of values built by ``*``, ``**``, ``+``, ``~``
and of widths given to filters), because a user's template runs even under ``--dry-run``. Any
failure while rendering a user's template is a :class:`ManifestError` naming the file and line.

The rendered text is parsed back (duplicate keys rejected) and validated against the JobSet CRD
before anything uses it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range

from elastix.errors import ElastixError, ManifestError
from elastix.protocol import envvars
from elastix.workload import crd, labels, platform
from elastix.workload.spec import WorkloadSpec, read_user_text

TEMPLATE = "pathways-jobset.yaml.j2"
# YAML forbids or folds these inside double-quoted scalars; JSON leaves them raw.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


class Encoded(str):
    """Text already encoded as JSON by the ``j`` filter: emitted as is."""


def to_json(value: Any) -> Encoded:
    """Encode a template value as one JSON (and therefore YAML flow) node."""
    if isinstance(value, Encoded):
        return value
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined raises UndefinedError, reported with the variable's name
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError) as e:
        raise ManifestError(f"emits a value that is not plain data: {e}",
                            hint="emit strings, numbers, booleans, lists or mappings, "
                                 "e.g. {{ spec.name }} rather than {{ spec }}") from None
    return Encoded(_YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


# User templates are untrusted code run even by --dry-run, so rendering is sandboxed and bounded:
# a JobSet manifest is far below these (the API server stores at most about 1.5 MB per object).
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


def _bounded_filter(name: str, fn: Any) -> Any:
    skip = 2 if getattr(fn, "jinja_pass_arg", None) else 1  # the context and the value

    @functools.wraps(fn)  # keeps jinja's pass_context/pass_environment marker
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _check_args(args[skip:], kwargs, f"filter {name}")
        return _sized(fn(*args, **kwargs), f"filter {name}")

    return wrapper


class _Sandbox(ImmutableSandboxedEnvironment):
    """Jinja2's sandbox (no Python internals, no mutation) plus budgets on size and loops."""

    intercepted_binops = frozenset({"*", "**", "+"})

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.iterations = 0
        self.emitted = 0

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
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
        _check_args(args, kwargs, f"{getattr(__obj, '__name__', 'a call')}()")
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

    def emit(self, value: Any) -> Encoded:
        """``finalize``: every ``{{ }}`` value, in the output or captured by set/macro blocks."""
        text = to_json(value)
        self.charge(len(text))
        return text


def _range(*args: int) -> range:
    """The sandbox's ``range`` (at most 100000 items), under the name templates call it by."""
    return safe_range(*args)


_range.__name__ = "range"  # error messages name what the template wrote


def _environment(loader: Any) -> _Sandbox:
    env = _Sandbox(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.finalize = env.emit
    env.filters = {name: _bounded_filter(name, fn) for name, fn in env.filters.items()}
    env.filters["j"] = to_json
    env.filters["tojson"] = to_json
    env.filters["_elastix_loop"] = env.count_loop
    env.globals["range"] = _range
    env.filters["_elastix_sized"] = lambda v: _sized(v, "'~'")
    return env


def _compile(env: _Sandbox, source: str, name: str) -> jinja2.Template:
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


def context(spec: WorkloadSpec) -> dict[str, Any]:
    """Everything a JobSet template can use, derived from a validated spec."""
    tpu = spec.tpu
    field = lambda path: {"valueFrom": {"fieldRef": {"fieldPath": path}}}  # noqa: E731
    coordinator = field(f"metadata.labels['{labels.COORDINATOR}']")
    jobset_labels = {**spec.labels, labels.WORKLOAD: spec.name, labels.MANAGED_BY: labels.MANAGED_BY_VALUE}
    if spec.queue:
        jobset_labels["kueue.x-k8s.io/queue-name"] = spec.queue
    server_common = [f"--gcs_scratch_location={spec.gcs_scratch}"]
    proxy_args = ["--server_port=29000", "--resource_manager_address=$(PATHWAYS_HEAD):29001",
                  *server_common]
    if spec.elastic:
        proxy_args.append(f"--num_elastic_slices={spec.elastic_slices}")
    rm_args = ["--server_port=29001", *server_common, "--node_type=resource_manager",
               f"--instance_count={spec.num_slices}",
               f"--instance_type={tpu.pathways_instance_type}"]
    sidecar = {} if spec.headless else {"restartPolicy": "Always"}
    proxy = {
        "name": labels.PROXY_CONTAINER, "image": spec.proxy_image, "imagePullPolicy": "Always",
        "args": proxy_args + spec.proxy_args,
        "env": [{"name": "PATHWAYS_HEAD", **coordinator}],
        "ports": [{"containerPort": 29000, "protocol": "TCP"}],
        "resources": {"limits": {"cpu": spec.proxy_cpu, "memory": spec.proxy_memory}},
        **sidecar,
    }
    rm = {
        "name": labels.RM_CONTAINER, "image": spec.server_image, "imagePullPolicy": "Always",
        "args": rm_args + spec.rm_args,
        "env": [
            {"name": "REPLICATED_JOB_NAME",
             **field(f"metadata.annotations['{labels.REPLICATED_JOB_NAME}']")},
            {"name": "JOBSET_NAME", **field(f"metadata.annotations['{labels.JOBSET_NAME}']")},
            {"name": "HOST_ADDRESS", **coordinator},
            {"name": "TPU_SKIP_MDS_QUERY", "value": "true"},
        ],
        "ports": [{"containerPort": 29001, "protocol": "TCP"},
                  {"containerPort": 29002, "protocol": "TCP"}],
        "resources": {"limits": {"cpu": spec.rm_cpu, "memory": spec.rm_memory}},
        **sidecar,
    }
    main_env: dict[str, Any] = {
        "PATHWAYS_HEAD": coordinator,
        "JAX_PLATFORMS": {"value": "proxy"},
        "XCLOUD_ENVIRONMENT": {"value": "GCP"},
        "JAX_BACKEND_TARGET": {"value": "grpc://$(PATHWAYS_HEAD):29000"},
        envvars.WORKLOAD: {"value": spec.name},
        envvars.NUM_SLICES: {"value": str(spec.num_slices)},
    }
    if spec.pathways_persistence:
        main_env[envvars.PATHWAYS_PERSISTENCE] = {"value": "1"}
    annotations = {labels.ELASTIC_SLICES: str(spec.elastic_slices),
                   labels.MAX_SLICE_RESTARTS: str(spec.slice_restarts)}
    if spec.events_path:
        main_env[envvars.EVENTS_FILE] = {"value": spec.events_path}
        annotations[labels.EVENTS_PATH] = spec.events_path
    for k, v in spec.env.items():  # the user's values win over the defaults above
        main_env[k] = {"value": v}
    worker_env = [
        {"name": "TPU_MIN_LOG_LEVEL", "value": "0"},
        {"name": "TF_CPP_MIN_LOG_LEVEL", "value": "0"},
        {"name": "XCLOUD_ENVIRONMENT", "value": "GCP"},
        {"name": "MEGASCALE_GRPC_ENABLE_XOR_TRACER", "value": "false"},
        {"name": "MEGASCALE_NUM_SLICES", **field(f"metadata.labels['{labels.REPLICATED_JOB_REPLICAS}']")},
        {"name": "JOBSET_NAME", **field(f"metadata.annotations['{labels.JOBSET_NAME}']")},
        {"name": "REPLICATED_JOB_NAME", **field(f"metadata.annotations['{labels.REPLICATED_JOB_NAME}']")},
        {"name": "MEGASCALE_SLICE_ID", **field(f"metadata.labels['{labels.JOB_INDEX}']")},
        {"name": "PATHWAYS_HEAD", **coordinator},
        {"name": "MEGASCALE_COORDINATOR_ADDRESS", **coordinator},
    ]
    return {
        "spec": spec,
        "tpu": tpu,
        "labels": labels,
        "jobset_labels": jobset_labels,
        "jobset_annotations": annotations,
        "pod_labels": {**spec.labels, labels.WORKLOAD: spec.name},
        "proxy_container": proxy,
        "rm_container": rm,
        "main_env": [{"name": k, **v} for k, v in main_env.items()],
        "worker_env": worker_env,
        "worker_args": ["--server_port=29005", "--resource_manager_address=$(PATHWAYS_HEAD):29001",
                        *server_common, *spec.worker_args],
        "worker_backoff_limit": platform.worker_backoff_limit(
            tpu.hosts, spec.elastic_slices, spec.slice_restarts),
    }


_VARIABLES_HINT = ("variables: spec, tpu, labels, jobset_labels, jobset_annotations, "
                   "pod_labels, main_env, worker_env, proxy_container, rm_container, "
                   "worker_args, worker_backoff_limit")


def render_text(spec: WorkloadSpec, template: str | Path | None = None) -> str:
    """Render the template (ours, or the user's file) to YAML text. Not yet validated.

    Raises:
        ManifestError: the template does not parse or fails while rendering (the message names
            the file and line); a render budget is exceeded.
    """
    values = context(spec)
    if template is None:
        env = _environment(jinja2.PackageLoader("elastix.templates", "."))
        name = TEMPLATE
        source = env.loader.get_source(env, TEMPLATE)[0]
    else:
        env, name = _environment(None), str(template)
        source = read_user_text(Path(template), "template", "--template", "save it as UTF-8 text")
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
    except (jinja2.UndefinedError, jinja2.exceptions.SecurityError, ManifestError,
            jinja2.TemplateError, ArithmeticError, LookupError, TypeError, ValueError,
            AttributeError, RecursionError, MemoryError) as e:
        if template is None and not isinstance(e, ElastixError):
            raise  # our own template failing is a bug, not the user's input
        raise _explain(e, name) from None
    return "".join(out)


def _explain(err: BaseException, name: str) -> ManifestError:
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
                               _VARIABLES_HINT)
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


def parse(text: str) -> dict[str, Any]:
    """Parse rendered YAML, rejecting duplicate keys (YAML would silently keep the last)."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Strict(base):  # type: ignore[misc, valid-type]
        pass

    def mapping(loader: Any, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise ManifestError(f"rendered manifest has a duplicate key {key!r} at line "
                                    f"{key_node.start_mark.line + 1}",
                                    hint="each key may appear once per mapping in the template")
            seen.add(key)
        return base.construct_mapping(loader, node, deep=deep)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        docs = [d for d in yaml.load_all(text, Loader=Strict) if d is not None]  # noqa: S506
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ManifestError(f"rendered manifest is not valid YAML{where}: "
                            f"{getattr(e, 'problem', None) or e}",
                            hint="check the template's indentation around that line") from None
    if len(docs) != 1:
        raise ManifestError(f"template must render exactly one YAML document, got {len(docs)}",
                            hint="remove extra '---' documents")
    return docs[0]


def render(spec: WorkloadSpec, template: str | Path | None = None) -> dict[str, Any]:
    """Render, parse and CRD-validate: the manifest every backend receives."""
    manifest = parse(render_text(spec, template))
    crd.validate(manifest)
    return manifest


def dump(manifest: dict[str, Any], fmt: str = "yaml") -> str:
    """Serialize a manifest as ``yaml`` or ``json`` text."""
    if fmt == "json":
        return json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(manifest, Dumper=dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=False, width=2**31 - 1)
