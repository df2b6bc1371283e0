"""Every command's Examples, shown at the end of its ``--help``.

In one table rather than in each command's docstring, so ``elastix --help`` and every group's
listing keep the one-sentence summaries while a command's own help ends with what to type.
Each line stays within 76 columns, so an 80-column terminal shows it unwrapped (a test walks
every command at 80 columns). A command missing here fails that test.
"""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "logs": (
        "elastix logs demo -f                     # follow the head's log",
        "elastix logs demo --slice 1 --host 0     # one worker's log",
        "elastix logs demo --tail 50 --timestamps",
    ),
    "version": ("elastix version",),
    "workload create": (
        "# local backend, no cloud: two slices of CPU devices",
        "elastix workload create demo --tpu-type v5litepod-8 --num-slices 2 \\",
        "  --elastic-slices 2",
        "# print the JobSet only",
        "elastix workload create demo --tpu-type v5litepod-16 --num-slices 3 \\",
        "  --docker-image IMAGE --command 'elastix-train' --dry-run",
        "# GKE",
        "elastix workload create demo --tpu-type v5litepod-16 --num-slices 3 \\",
        "  --elastic-slices 3 --max-slice-restarts 10 --docker-image IMAGE \\",
        "  --command 'elastix-train --checkpoint-dir gs://BUCKET/run1' \\",
        "  --cluster CLUSTER --project PROJECT --location us-central1-a",
    ),
    "workload fit-check": (
        "# the seed's run: Qwen3-4B on 3 x v5e-16, every mesh it can shrink to",
        "elastix workload fit-check --tpu-type v5litepod-16 --num-slices 3 \\",
        "  --elastic-slices 3 --docker-image IMAGE \\",
        "  --command 'elastix-train --preset qwen3-4b --seq-len 2048'",
        "elastix workload fit-check --spec spec.yaml -o json",
    ),
    "workload lint": (
        "elastix workload lint spec.yaml         # a spec file, as --spec takes",
        "elastix workload lint m.yaml -o json    # a JobSet (create's --dry-run)",
    ),
    "workload goodput": (
        "elastix workload goodput demo",
        "elastix workload goodput demo -o json",
        "elastix workload goodput --log head.log   # a saved head log",
    ),
    "workload advise": (
        "elastix workload advise demo --mtbf 6h   # your fleet's slice MTBF",
        "elastix workload advise demo --mtbf 6h --head-mtbf 30d --plot advice.png",
        "elastix workload advise --events events.jsonl -o json",
    ),
    "workload forecast": (
        "elastix workload forecast demo --slices 256 --host-mtbf 200d",
        "elastix workload forecast --events events.jsonl --replace-time 5m,20m",
        "elastix workload forecast demo --slices 1024 --days 30 --plot forecast.png",
    ),
    "workload list": (
        "elastix workload list",
        "elastix workload list -l team=ml -o wide",
    ),
    "workload status": (
        "elastix workload status demo",
        "elastix workload status demo -o json",
    ),
    "workload inspect": (
        "elastix workload inspect demo --output-file demo-inspect.json",
        "elastix workload inspect xpk-run -n team-a -o yaml   # a JobSet xpk made",
    ),
    "workload delete": (
        "elastix workload delete demo",
        "elastix workload delete demo --delete-data   # its checkpoints too",
        "elastix workload delete run1 run2 run3",
        "elastix workload delete -l team=ml            # every workload labelled so",
    ),
    "workload wait": (
        "elastix workload wait demo --for stepping --timeout 5m",
        "elastix workload wait demo --for deleted",
    ),
    "chaos kill-worker": (
        "elastix chaos kill-worker demo --slice 1 --measure",
        "elastix chaos kill-worker demo --dry-run     # which pod it would kill",
    ),
    "chaos run": (
        "elastix chaos run demo --kills 3 --interval 2m",
        "elastix chaos run demo --kills 1 --max-downtime 30s -o json",
    ),
    "image build": (
        "elastix image build --tag us-docker.pkg.dev/PROJECT/REPO/trainer:TAG",
        "elastix image build --tag IMAGE --dry-run    # the Dockerfile and plan",
    ),
    "cluster create": (
        "elastix cluster create demo-cluster --project PROJECT \\",
        "  --zone us-central1-a --tpu-type v5litepod-16 --num-slices 3",
        "elastix cluster create demo-cluster --project PROJECT \\",
        "  --zone us-central1-a --tpu-type v5litepod-16 --dry-run",
    ),
    "cluster describe": (
        "elastix cluster describe demo-cluster --project PROJECT \\",
        "  --zone us-central1-a",
    ),
    "cluster delete": (
        "elastix cluster delete demo-cluster --project PROJECT \\",
        "  --zone us-central1-a --yes",
    ),
}
"""Command path (as typed after ``elastix``) -> example lines."""


def epilog(path: str) -> str | None:
    """The Examples block for one command (click keeps a paragraph after ``\\b`` as is)."""
    lines = EXAMPLES.get(path)
    if not lines:
        return None
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


def summary(help_text: str | None) -> str | None:
    """A command's one-line summary for its group's listing: the help's first sentence, whole
    (click would cut it at the column width with "...")."""
    if not help_text:
        return None
    first = help_text.strip().split("\n\n", 1)[0].replace("\n", " ")
    head, dot, _ = first.partition(". ")
    return head + "." if dot else first


def argument_help(path: str, name: str) -> str | None:
    """The help of a command's positional argument.

    Typer 0.20 keeps an argument's ``help`` on its own attribute and then calls click's
    constructor without it, which since click 8.2 (``Parameter(help=...)``) sets ``help`` back
    to None: ``--help`` listed ``[NAME]`` with no words. The help is therefore restored here
    from one table; ``tests/commands/test_help.py`` checks every argument has it.
    """
    if path == "workload delete" and name == "names":
        return "Workload names (or --workload NAME, or -l SELECTOR for every match)."
    if path == "workload lint" and name == "file":
        return ("A workload spec file (what --spec takes) or a rendered JobSet manifest (YAML "
                "or JSON, e.g. from workload create --dry-run).")
    if name != "name":
        return None
    if path.startswith("cluster "):
        return "Cluster name (or --cluster NAME)."
    if path == "workload create":
        return ("Workload name (or --workload NAME): a DNS label short enough for every name "
                "JobSet derives from it, at most 22 characters with the built-in template.")
    return "Workload name (or --workload NAME)."


def duration_text(seconds: float) -> str:
    """A default duration as the user types one (``60s``, ``5m``, ``1h30m``), not ``60.0``."""
    if seconds != int(seconds) or seconds < 60:
        return f"{seconds:g}s"
    out, rest = "", int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out += f"{rest // size}{unit}"
            rest %= size
    return out
