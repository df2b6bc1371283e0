"""`elastix image` commands."""

from __future__ import annotations

from pathlib import Path

import typer

from elastix.errors import UsageError, shown

app = typer.Typer(no_args_is_help=True)


@app.command("build", help="Build the trainer image with the local Docker engine and push it.")
def build(
    tag: str = typer.Option(..., "--tag", "-t", help="Image reference to build and push."),
    base_image: str = typer.Option(
        "python:3.11-slim-bookworm", "--base-image",
        help="Python base image (Python 3.11+: pathwaysutils 0.1.13 and jax 0.10 need it)."),
    platform: str = typer.Option(
        "linux/amd64", "--platform",
        help="Platform to build for (os/arch): the cluster nodes' (GKE TPU and CPU "
             "nodes are linux/amd64)."),
    requirement: list[str] = typer.Option(
        [], "--requirement", help="Extra pip requirement (repeatable)."),
    requirements_file: Path | None = typer.Option(
        None, "--requirements-file", help="File of extra pip requirements, one per line."),
    source: Path | None = typer.Option(
        None, "--source", help="elastix source tree to install (default: this one)."),
    uid: int = typer.Option(1000, "--uid", help="uid/gid of the image's non-root user."),
    push: bool = typer.Option(True, "--push/--no-push", help="Push after building."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the Dockerfile and the build plan; build nothing."),
    context_dir: Path | None = typer.Option(
        None, "--context-dir", help="Also write the build context here (for Cloud Build or "
        "another engine)."),
) -> None:
    from elastix.provision import image
    from elastix.views.console import console
    from elastix.workload.spec import read_user_text
    extra = list(requirement)
    if requirements_file is not None:
        # The reader every user-named file goes through: a missing or non-UTF-8 file is one line.
        text = read_user_text(requirements_file, "requirements file", "--requirements-file",
                              "save it as UTF-8 text, one requirement per line")
        extra += [ln.strip() for ln in text.splitlines()
                  if ln.strip() and not ln.lstrip().startswith("#")]
    req = image.ImageRequest(tag=tag, base_image=base_image, extra_requirements=tuple(extra),
                             source_dir=source, uid=uid, push=push, platform=platform)
    plan = image.plan_build(req)
    out = console(soft_wrap=True)
    if context_dir is not None:
        _write_context(plan, context_dir)
        out.print(f"wrote the build context to {context_dir}", markup=False)
    if dry_run:
        out.print("# Dockerfile", markup=False)
        out.print(plan.dockerfile, markup=False, end="")
        out.print("# build plan", markup=False)
        for line in plan.summary_lines():
            out.print(f"- {line}", markup=False)
        return
    image_id, digest = image.build(plan, on_line=lambda s: out.print(s, markup=False))
    out.print(f"built {tag} ({image_id})", markup=False)
    if digest:
        out.print(f"pushed {tag}@{digest}", markup=False)


def _write_context(plan, context_dir: Path) -> None:
    """Write the build context into a new or empty directory; one-line errors otherwise."""
    hint = "pass a new or empty directory"
    try:
        if context_dir.exists() and not context_dir.is_dir():
            raise UsageError(f"--context-dir {context_dir} is not a directory", hint=hint)
        if context_dir.exists() and any(context_dir.iterdir()):
            raise UsageError(f"--context-dir {context_dir} is not empty", hint=hint)
        context_dir.mkdir(parents=True, exist_ok=True)
        plan.write_context(context_dir)
    except OSError as e:
        raise UsageError(f"cannot write the build context to {shown(str(context_dir))}: "
                         f"{e.strerror}",
                         hint=hint) from None
