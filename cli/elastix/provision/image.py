"""The trainer image: render its Dockerfile, assemble the build context, build and push it.

The image runs on the Pathways head pod. Its Python requirements are the project's own launcher
dependencies plus the ``trainer`` extra (read from ``pyproject.toml``, so the image and
``pip install elastix[trainer]`` never drift apart), plus whatever the user adds. The project is
installed from the source tree with ``--no-deps`` in a second layer.

Nothing secret enters the image: the only build argument is the base image, and registry
credentials travel in the push request's header, never in the build context.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import tarfile
from collections.abc import Callable
from pathlib import Path

from elastix.errors import BackendError, UsageError

DEFAULT_BASE_IMAGE = "python:3.11-slim-bookworm"
DEFAULT_UID = 1000
MIN_PYTHON = (3, 11)
"""The oldest Python the image can run: pathwaysutils 0.1.13, jax 0.10.2, orbax-checkpoint
0.12.8 and grain 0.2.18 (the trainer extra) all declare ``Requires-Python >=3.11``."""
DEFAULT_PLATFORM = "linux/amd64"
"""The platform of the nodes the image runs on: GKE's TPU VMs and the head pool's N2 machines
are x86-64, and xpk builds its images ``--platform=linux/amd64`` (``src/xpk/core/
docker_image.py`` L210 @ 367c838). Without it an engine on an arm64 machine builds arm64 and
the head fails with "exec format error"."""
# Docker's platform syntax: os[/arch[/variant]] (Engine API, POST /build, ``platform``).
_PLATFORM_RE = re.compile(r"^[a-z0-9]+(?:/[a-z0-9_]+(?:/[a-z0-9]+)?)?\Z")
# A Python version at the head of a base image tag (python:3.10-slim, python:3.12).
_PY_TAG_RE = re.compile(r"^(?:python)?(\d+)\.(\d+)(?:[.-]|$)")
# Files and directories of the source tree that go into the image (an allow-list, so nothing
# else in a checkout, such as .env files or credentials, can end up in a layer).
SOURCE_ITEMS = ("pyproject.toml", "README.md", "LICENSE", "cli", "trainer", "templates")
_SKIP_PARTS = {"__pycache__", ".pytest_cache", ".ruff_cache"}
_SKIP_SUFFIXES = (".pyc", ".pyo")

# Docker's reference grammar, simplified: [registry[:port]/]path[:tag][@digest].
_REF_RE = re.compile(
    r"^(?:(?P<registry>[a-zA-Z0-9.-]+(?::[0-9]+)?)/)?"
    r"(?P<path>[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?:@sha256:[0-9a-f]{64})?$"
)
_GOOGLE_REGISTRY_RE = re.compile(r"^(?:[a-z0-9-]+-docker\.pkg\.dev|(?:[a-z]+\.)?gcr\.io)\Z")


@dataclasses.dataclass(frozen=True)
class ImageRequest:
    """What the user asked for with ``elastix image build``."""

    tag: str
    """Image reference to build and push, e.g. ``us-docker.pkg.dev/p/repo/trainer:v1``."""
    base_image: str = DEFAULT_BASE_IMAGE
    """Python base image (Python 3.11+ with pip and venv)."""
    extra_requirements: tuple[str, ...] = ()
    """Extra pip requirement lines installed next to the trainer's own."""
    source_dir: Path | None = None
    """elastix source tree to install; default: the tree this elastix runs from."""
    uid: int = DEFAULT_UID
    """uid (and gid) of the non-root user the trainer runs as."""
    push: bool = True
    """Push after building."""
    platform: str = DEFAULT_PLATFORM
    """The platform to build for (``os/arch[/variant]``): the cluster nodes'."""


@dataclasses.dataclass(frozen=True)
class BuildPlan:
    """Everything a build will do, shown by ``--dry-run`` and executed by :func:`build`."""

    request: ImageRequest
    dockerfile: str
    requirements: tuple[str, ...]
    files: dict[str, bytes]
    registry: str

    def summary_lines(self) -> list[str]:
        """Human-readable plan, one step per line."""
        size = sum(len(b) for b in self.files.values())
        req = self.request
        lines = [
            f"build context: {len(self.files)} files, {size / 1024:.0f} KiB "
            f"(Dockerfile, requirements.txt, extra-requirements.txt, src/ from {_source(req)})",
            f"base image: {req.base_image}",
            f"platform: {req.platform} (the cluster nodes')",
            f"requirements: {len(self.requirements)} from pyproject.toml "
            f"(launcher + trainer extra), {len(req.extra_requirements)} extra",
            f"POST /build?t={req.tag}&platform={req.platform} to the Docker engine (DOCKER_HOST or "
            "unix:///var/run/docker.sock)",
        ]
        if req.push:
            lines.append(f"POST /images/{req.tag.rsplit(':', 1)[0]}/push to {self.registry} "
                         f"(credentials: {_auth_source(self.registry)})")
        else:
            lines.append("no push (--no-push)")
        return lines

    def write_context(self, directory: Path) -> None:
        """Write the build context to ``directory`` (for Cloud Build or another engine)."""
        for name, data in self.files.items():
            path = directory / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def context_tar(self) -> bytes:
        """The build context as an uncompressed tar with fixed metadata (reproducible)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name in sorted(self.files):
                info = tarfile.TarInfo(name)
                info.size = len(self.files[name])
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(self.files[name]))
        return buf.getvalue()


def _source(req: ImageRequest) -> str:
    return str(req.source_dir) if req.source_dir else "this elastix's source tree"


def registry_of(tag: str) -> str:
    """The registry host of an image reference (Docker Hub when there is none)."""
    first = tag.split("/", 1)[0]
    if "/" in tag and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def _capitals(ref: str) -> str:
    """Why a reference that only its capitals spoil is refused (README's placeholders,
    ``PROJECT/REPO``, are such a one), or ""."""
    head, colon, tag = ref.rpartition(":")
    if not colon or "/" in tag:  # no tag: that colon was a registry's port, or none
        head, tag = ref, ""
    else:
        tag = ":" + tag
    upper = sorted(set(re.findall(r"[^/.:_-]*[A-Z][^/.:_-]*", head)))
    if not upper or not _REF_RE.match(head.lower() + tag):
        return ""
    return (f": an image name must be lowercase, and {', '.join(upper)} "
            f"{'is' if len(upper) == 1 else 'are'} not (replace placeholders with your own "
            "project and repository)")


def validate_request(req: ImageRequest) -> None:
    """Reject a bad tag, base image or requirement before anything is built.

    Raises:
        UsageError: the first problem found, with a hint.
    """
    for what, ref in (("--tag", req.tag), ("--base-image", req.base_image)):
        if not _REF_RE.match(ref):
            raise UsageError(f"{what} {ref!r} is not a valid image reference"
                             + _capitals(ref),
                             hint="e.g. us-docker.pkg.dev/my-project/my-repo/trainer:v1")
    if "@" in req.tag:
        raise UsageError(f"--tag {req.tag!r} has a digest; a build can only set a tag",
                         hint="drop the @sha256:… part")
    problem = base_python_problem(req.base_image)
    if problem:
        raise UsageError(problem, hint=f"use a Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]}+ image, "
                                       f"e.g. {DEFAULT_BASE_IMAGE}")
    if not _PLATFORM_RE.match(req.platform):
        raise UsageError(f"--platform {req.platform!r} is not a platform",
                         hint=f"os/arch or os/arch/variant, e.g. {DEFAULT_PLATFORM}")
    if not 0 < req.uid < 2**31:
        raise UsageError(f"--uid {req.uid} is out of range", hint="use e.g. 1000")
    for line in req.extra_requirements:
        if not line.strip() or "\n" in line or line.lstrip().startswith("-"):
            raise UsageError(f"extra requirement {line!r} is not a requirement specifier",
                             hint="one specifier per --requirement, e.g. 'transformers==4.46.0'")


def base_python_problem(base_image: str) -> str | None:
    """Why ``base_image`` cannot run the trainer, when its tag says its Python version.

    Only the official ``python`` images (any registry mirror) and tags that start with the
    version are judged; any other image is taken on trust (its Python is not visible here).
    """
    ref = base_image.split("@", 1)[0]
    repo, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "")
    m = _PY_TAG_RE.match(tag)
    if not m or repo.rsplit("/", 1)[-1] != "python":
        return None
    version = (int(m.group(1)), int(m.group(2)))
    if version >= MIN_PYTHON:
        return None
    return (f"--base-image {base_image} has Python {version[0]}.{version[1]}; the trainer needs "
            f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]}+ (pathwaysutils 0.1.13, jax 0.10 and orbax 0.12 "
            "require it)")


def find_source_dir(explicit: Path | None = None) -> Path:
    """The elastix source tree to install into the image.

    Raises:
        UsageError: no source tree (e.g. elastix was installed from a wheel).
    """
    # The checkout's root is the one ancestor of this file holding elastix's pyproject.toml.
    candidate = explicit or next((p for p in Path(__file__).resolve().parents
                                  if (p / "pyproject.toml").is_file()), Path(__file__).parent)
    pyproject = candidate / "pyproject.toml"
    try:
        ours = pyproject.is_file() and 'name = "elastix"' in pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        ours = False
    if not ours:
        raise UsageError(f"{candidate} is not an elastix source tree (no pyproject.toml for "
                         "elastix)", hint="pass --source DIR pointing at an elastix checkout")
    return candidate


def project_requirements(source_dir: Path) -> list[str]:
    """The launcher's dependencies plus the ``trainer`` extra, from the source tree."""
    try:
        import tomllib
    except ImportError as err:  # Python 3.10
        raise UsageError("reading pyproject.toml needs Python 3.11 or newer",
                         hint="run elastix with Python 3.11+ to build images") from err
    try:
        project = tomllib.loads((source_dir / "pyproject.toml").read_text(encoding="utf-8"))
        project = project["project"]
        extras = project.get("optional-dependencies", {})
    except (tomllib.TOMLDecodeError, KeyError, AttributeError) as err:
        raise UsageError(f"{source_dir / 'pyproject.toml'} is not a valid pyproject.toml "
                         f"({type(err).__name__}: {err})",
                         hint="pass --source DIR pointing at an elastix checkout") from None
    return list(project.get("dependencies", [])) + list(extras.get("trainer", []))


def render_dockerfile(base_image: str, uid: int) -> str:
    """Render ``templates/Dockerfile.j2``.

    Every value goes through a filter: ``dq`` (a JSON string, which Dockerfile ARG/ENV and the
    shell both read as one quoted word) or ``int_str`` (an integer), never raw text.
    """
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.filters["dq"] = lambda v: json.dumps(str(v))
    env.filters["int_str"] = lambda v: str(int(v))
    return env.get_template("Dockerfile.j2").render(base_image=base_image, uid=uid)


def _templates_dir() -> Path:
    import elastix.templates

    return Path(elastix.templates.__file__).parent


def plan_build(req: ImageRequest) -> BuildPlan:
    """Validate the request and assemble the Dockerfile and build context.

    Raises:
        UsageError: bad tag, base image, requirement or source tree.
    """
    validate_request(req)
    source = find_source_dir(req.source_dir)
    reqs = project_requirements(source)
    files: dict[str, bytes] = {
        "Dockerfile": render_dockerfile(req.base_image, req.uid).encode(),
        "requirements.txt": ("\n".join(reqs) + "\n").encode(),
        "extra-requirements.txt": "".join(f"{r.strip()}\n" for r in req.extra_requirements)
        .encode(),
    }
    try:
        files.update(_source_files(source))
    except OSError as err:
        raise UsageError(f"cannot read the source tree {source}: {err.strerror} "
                         f"({err.filename})", hint="pass --source DIR of a readable checkout") \
            from None
    return BuildPlan(req, files["Dockerfile"].decode(), tuple(reqs), files, registry_of(req.tag))


def _source_files(source: Path) -> dict[str, bytes]:
    """The source items of the tree, as ``src/...`` context paths."""
    files = {}
    for item in SOURCE_ITEMS:
        path = source / item
        if path.is_file():
            files[f"src/{item}"] = path.read_bytes()
        elif path.is_dir():
            for f in sorted(path.rglob("*")):
                rel = f.relative_to(source)
                if (f.is_file() and not _SKIP_PARTS.intersection(rel.parts)
                        and not f.name.endswith(_SKIP_SUFFIXES)
                        and not any(p.startswith(".") for p in rel.parts)):
                    files[f"src/{rel.as_posix()}"] = f.read_bytes()
    return files


def _auth_source(registry: str) -> str:
    if _GOOGLE_REGISTRY_RE.match(registry):
        return "Google application-default credentials"
    return "~/.docker/config.json auths entry, if any"


def registry_auth(registry: str) -> dict[str, str] | None:
    """Credentials for the push request header (never written into the image).

    Google registries get an OAuth token from application-default credentials; other registries
    use a static ``auths`` entry of the Docker config if there is one, else anonymous.
    """
    if _GOOGLE_REGISTRY_RE.match(registry):
        import google.auth
        import google.auth.exceptions
        import google.auth.transport.requests

        try:
            creds, _ = google.auth.default(
                scopes=["https://www.googleapis.com/auth/cloud-platform"])
            creds.refresh(google.auth.transport.requests.Request())
        except google.auth.exceptions.GoogleAuthError as err:
            raise BackendError(f"no Google credentials to push to {registry}: {err}",
                               hint="run `gcloud auth application-default login`") from err
        return {"username": "oauth2accesstoken", "password": creds.token,
                "serveraddress": registry}
    config = Path(os.environ.get("DOCKER_CONFIG", Path.home() / ".docker")) / "config.json"
    try:
        auths = json.loads(config.read_text()).get("auths", {})
    except (OSError, ValueError):
        return None
    for key in (registry, f"https://{registry}", "https://index.docker.io/v1/"):
        entry = auths.get(key)
        if isinstance(entry, dict) and entry.get("auth"):
            return {"auth": entry["auth"], "serveraddress": registry}
    return None


def build(plan: BuildPlan, on_line: Callable[[str], None],
          env: dict[str, str] | None = None) -> tuple[str, str]:
    """Build (and push, unless the request says not to) with the Docker engine.

    Returns:
        (image id, pushed digest or "").

    Raises:
        BackendError: no engine reachable (the hint names the alternatives), or the build or
            push failed.
    """
    from elastix.clients.docker_engine import DockerEngine

    engine = DockerEngine.connect(env)
    image_id = engine.build(plan.context_tar(), plan.request.tag,
                            {"BASE_IMAGE": plan.request.base_image}, on_line,
                            platform=plan.request.platform)
    digest = ""
    if plan.request.push:
        digest = engine.push(plan.request.tag, registry_auth(plan.registry), on_line)
    return image_id, digest
