"""The ``elastix`` entry point: one Typer app and the one error boundary.

Command modules are imported here, so they must stay light: heavy libraries (``kubernetes``,
``google.cloud``, ``jinja2``, ``jsonschema``) are imported inside the functions that use them.
"""

from __future__ import annotations

import os
import signal
import sys

import click
import typer

from elastix import __version__, interrupts
from elastix.commands import (
    advise,
    chaos,
    cluster,
    delete,
    examples,
    forecast,
    image,
    inspect,
    logs,
    wait,
    workload,
)
from elastix.errors import EXIT_CODES_HELP, ElastixError, ExitCode, ProblemsError, UsageError
from elastix.protocol import envvars

HELP_MAX_WIDTH = 120  # --help uses the terminal's width, up to this
_NB_HYPHEN = "\u2011"


class _HelpFormatter(click.HelpFormatter):
    """Click's help layout, wrapped at spaces only, so a flag named in a help text stays whole.

    Click writes every option name whole (a long one puts its help on the next line); its text
    wrapper would still break ``--dry-run`` after ``--dry-``. Hyphens are swapped for
    non-breaking ones while wrapping and restored in :meth:`getvalue`. Typer escapes ``[`` for
    Rich even when Rich does not render the help; the escape is dropped here.
    """

    def write_text(self, text: str) -> None:
        super().write_text(text.replace("-", _NB_HYPHEN))

    def write_dl(self, rows, col_max: int = 30, col_spacing: int = 2) -> None:
        rows = [(first, second.replace("\\[", "[").replace("-", _NB_HYPHEN))
                for first, second in rows]
        super().write_dl(rows, col_max, col_spacing)

    def getvalue(self) -> str:
        return super().getvalue().replace(_NB_HYPHEN, "-")


class _Context(click.Context):
    formatter_class = _HelpFormatter

app = typer.Typer(
    name="elastix",
    help="Launch and measure elastic JAX training with Pathways on GKE, or locally.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion
    pretty_exceptions_enable=False,
    # Click's layout, not Rich's: Rich's option table cuts long option names at 80 columns.
    rich_markup_mode=None,
    context_settings={"max_content_width": HELP_MAX_WIDTH},
)


def _group(commands: dict[str, object]) -> typer.Typer:
    """A command group: one Typer with these handlers, under these names, in this order."""
    group = typer.Typer(no_args_is_help=True)
    for name, handler in commands.items():
        group.command(name)(handler)
    return group


# Every command is registered here, by name, so this is the one list of what elastix does.
app.add_typer(_group({"create": workload.create, "goodput": workload.goodput,
                      "advise": advise.advise, "forecast": forecast.forecast,
                      "list": workload.list_, "status": workload.status,
                      "wait": wait.wait, "inspect": inspect.inspect, "delete": delete.delete,
                      "lint": workload.lint, "fit-check": workload.fit_check}),
              name="workload", help="Create, list, inspect and delete workloads.")
app.command("logs", help="Stream a workload's logs (the head's main container by default).")(
    logs.logs
)
app.add_typer(_group({"kill-worker": chaos.kill_worker, "run": chaos.run}),
              name="chaos", help="Inject failures and measure the recovery.")
app.add_typer(image.app, name="image", help="Build and push the trainer image.")
app.add_typer(cluster.app, name="cluster", help="Create, describe and delete GKE clusters.")
app.info.epilog = EXIT_CODES_HELP


def _print_version(value: bool) -> None:
    if value:
        version()
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks and debug logs."),
    _version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                  help="Print the elastix version and exit."),
) -> None:
    if debug:
        os.environ[envvars.DEBUG] = "1"


@app.command("version", help="Print the elastix version.")
def version() -> None:
    typer.echo(f"elastix {__version__}")


def _neighbours_answer(err: Exception, no_such_command: type | tuple, argv: list[str]
                       ) -> tuple[str, str] | None:
    """xpk's or gcluster's answer (message, hint) to a command click does not know, when one
    of them spells it so (:mod:`elastix.commands.xpk`, ``gcluster``); else None."""
    ctx = getattr(err, "ctx", None)
    if ctx is None or not isinstance(err, no_such_command):
        return None
    from elastix.commands import gcluster, xpk

    where = ctx.command_path.partition(" ")[2]
    rest = argv[argv.index(err.command_name) + 1:] if err.command_name in argv else []
    return xpk.did_you_mean_command(where, err.command_name) or \
        gcluster.did_you_mean_command(where, err.command_name, rest)


class UnknownFlags(ProblemsError):
    """Every flag of one command line that its command does not take, each with its answer
    (xpk's or gcluster's spelling, or the nearest flag): click stops at the first."""

    subject = "on the command line"

    def lines(self) -> list[str]:
        return [msg + (f" ({hint})" if hint else "") for _, msg, hint in self.problems]


def _unknown_flags(err: Exception, argv: list[str]) -> UnknownFlags | None:
    """The unknown option click stopped at and every other one after it on the line, each
    answered, when the line has more than one; else None (click's own message is said)."""
    ctx = getattr(err, "ctx", None)
    if ctx is None:
        return None
    from elastix.commands import gcluster, xpk

    cmd, where = ctx.command, ctx.command_path.partition(" ")[2]
    words = where.split()
    at = 0
    for word in words:  # the command's words in the line: its own arguments follow them
        at = argv.index(word, at) + 1 if word in argv[at:] else at
    takes = {o: p for p in cmd.params if isinstance(p, click.Option)
             for o in (*p.opts, *p.secondary_opts)}
    unknown: list[str] = []
    rest = iter(argv[at:])
    for arg in rest:
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-" or arg[1:2].isdigit():
            continue
        flag, eq, _ = arg.partition("=")
        param = takes.get(flag) or takes.get(arg)
        if param is None:
            if flag not in unknown:
                unknown.append(flag)
        elif not eq and not (param.is_flag or param.count) and flag == arg:
            next(rest, None)  # its value
    if len(unknown) < 2:
        return None
    problems = []
    for flag in unknown:
        answer = xpk.did_you_mean(where, flag) or gcluster.did_you_mean(where, flag)
        if answer is None:
            import difflib

            near = difflib.get_close_matches(flag, list(takes), n=1)
            answer = (f"no such option {flag}", f"did you mean {near[0]}?" if near else None)
        problems.append((flag, *answer))
    return UnknownFlags(problems)


def _print_error(err: ElastixError) -> None:
    from rich.markup import escape

    from elastix.views.console import console as make_console

    console = make_console(stderr=True, soft_wrap=True)
    # the message and hint are text: brackets in them (pip install 'elastix[trainer]') are
    # not Rich markup
    console.print(f"[bold red]error:[/] {escape(err.message)}", markup=True)
    if isinstance(err, ProblemsError) and len(err.problems) > 1:
        for line in err.lines():
            console.print(f"  - {line}", markup=False)
    if err.hint:
        console.print(f"[dim]hint:[/] {escape(err.hint)}", markup=True)


def _normalize(argv: list[str]) -> list[str]:
    """``--dry-run=client|server`` (kubectl's spelling) onto the flags Typer can parse."""
    out = []
    # --debug is elastix's own option, but a user adds it where the error was, after the
    # subcommand (the hints say "run again with --debug"): taken from anywhere before a
    # `--`, as the root's.
    if "--debug" in argv[:argv.index("--") if "--" in argv else len(argv)]:
        cut = argv.index("--") if "--" in argv else len(argv)
        argv = ["--debug", *[a for a in argv[:cut] if a != "--debug"], *argv[cut:]]
    for arg in argv:
        if arg.startswith("--dry-run="):
            value = arg.split("=", 1)[1]
            if value not in ("client", "server"):
                raise UsageError(f"--dry-run={value!r} is not client or server",
                                 hint="use --dry-run (client) or --dry-run=server")
            arg = "--server-dry-run" if value == "server" else "--dry-run"
        out.append(arg)
    return out


def _no_section(ctx: click.Context, formatter: click.HelpFormatter) -> None:
    return None


def _complete_tpu_type(ctx: click.Context, param: click.Parameter,
                       incomplete: str) -> list[str]:
    from elastix.commands.options import complete_tpu_type

    return complete_tpu_type(incomplete)


def command() -> click.Command:
    """The click command tree of ``app``, every command formatting its help with ours, its
    summary whole in its group's listing and its examples at the end of its help."""
    root = typer.main.get_command(app)
    todo = [((), root)]
    while todo:
        path, cmd = todo.pop()
        cmd.context_class = _Context
        cmd.short_help = cmd.short_help or examples.summary(cmd.help)
        cmd.epilog = cmd.epilog or examples.epilog(" ".join(path))
        for param in cmd.params:
            if isinstance(param, click.Argument) and not getattr(param, "help", None):
                param.help = examples.argument_help(" ".join(path), param.name or "")
            if isinstance(param, click.Option) and "--tpu-type" in param.opts:
                # workload create's comes from the spec's fields, cluster create's is its own:
                # one completion for both (what click's shell_complete= sets).
                param._custom_shell_complete = _complete_tpu_type
            if isinstance(param, click.Option) and param.metavar == "DURATION" \
                    and isinstance(param.default, (int, float)) \
                    and not isinstance(param.default, bool):
                # Shown as the user types one (1m, not 60.0); the option's parser reads it back.
                param.default = examples.duration_text(param.default)
        # Typer lists the arguments in its own "Arguments" section; click 8.5 would add a
        # second one ("Positional arguments") now that they have help.
        cmd.format_arguments = _no_section
        todo.extend(((*path, name), sub) for name, sub in getattr(cmd, "commands", {}).items())
    return root


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; map errors to one red line plus a hint and an exit code.

    ``argv`` None: the program's own run, ``sys.argv``. A command that held Ctrl-C past its
    commit point (:mod:`elastix.interrupts`) has the program ignore it until the process
    exits; a caller passing ``argv`` gets its Ctrl-C back when this returns."""
    try:
        code = _main(sys.argv[1:] if argv is None else list(argv))
    finally:
        interrupts.release(exiting=argv is None)
    if code == ExitCode.INTERRUPTED and interrupts.terminated():
        # A SIGTERM a command took to undo what it did first (a host it stopped): the
        # program then ends as SIGTERM ends a process, which its parent can tell; a caller
        # passing ``argv`` gets 128 + 15, what a shell reports for it.
        if argv is None:
            _die_of(signal.SIGTERM)
        return 128 + signal.SIGTERM
    return code


def _die_of(sig: signal.Signals) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


def _interrupted() -> str:
    return "terminated (SIGTERM)\n" if interrupts.terminated() else "interrupted\n"


def _main(argv: list[str]) -> int:
    debug = "--debug" in argv
    stdout = sys.stdout
    try:
        try:
            result = command().main(args=_normalize(argv), prog_name="elastix",
                                    standalone_mode=False)
        except SystemExit:
            # click ends a command whose stdout was closed by its reader (`| head`) with exit
            # 1 and no word, having wrapped stdout so the interpreter's last flush is quiet:
            # the reader had what it wanted, so that is a quiet success, as git's and ls's is.
            if getattr(sys.stdout, "wrapped", None) is stdout is not sys.stdout:
                return 0
            raise
        if result == ExitCode.INTERRUPTED:  # typer turns Ctrl-C into Exit(130) and returns it
            sys.stderr.write(_interrupted())  # when not standalone
            return ExitCode.INTERRUPTED
    except ElastixError as err:
        if debug:
            raise
        _print_error(err)
        return err.exit_code
    except KeyboardInterrupt:
        if debug:
            raise
        sys.stderr.write(_interrupted())
        return ExitCode.INTERRUPTED
    except Exception as err:  # click usage errors and anything unexpected
        from click import exceptions as click_errors

        if isinstance(err, typer.Exit):
            return err.exit_code
        if isinstance(err, typer.Abort):
            sys.stderr.write("aborted\n")
            return ExitCode.INTERRUPTED
        if isinstance(err, click_errors.NoArgsIsHelpError):
            err.show()
            return 0
        no_such_command = getattr(click_errors, "NoSuchCommand", ())  # click >= 8.4
        every = _unknown_flags(err, argv) if isinstance(err, click_errors.NoSuchOption) \
            else None
        if every is not None:
            every.hint = f"see '{err.ctx.command_path} --help'"
            _print_error(every)
            return 2
        answer = _neighbours_answer(err, no_such_command, argv)
        if answer is None and isinstance(err, click_errors.NoSuchOption) and err.ctx:
            from elastix.commands import gcluster, xpk

            where = err.ctx.command_path.partition(" ")[2]
            answer = xpk.did_you_mean(where, err.option_name) or \
                gcluster.did_you_mean(where, err.option_name)
        if answer:
            _print_error(UsageError(*answer))
            return 2
        if isinstance(err, click_errors.UsageError):
            cmd = err.ctx.command_path if err.ctx else "elastix"
            message = err.format_message()
            if isinstance(err, no_such_command) and "Did you mean" in err.message:
                message = err.message  # typer suggested already; click would add it again
            _print_error(UsageError(message, hint=f"see '{cmd} --help'"))
            return 2
        if isinstance(err, click_errors.ClickException):
            _print_error(ElastixError(err.format_message()))
            return err.exit_code
        if debug:
            raise
        said = str(err)  # bounded: an error may quote a whole value
        said = said if len(said) <= 300 else said[:300] + "..."
        sys.stderr.write(f"error: unexpected {type(err).__name__}: {said}\n")
        sys.stderr.write("hint: run again with --debug for the traceback, and report it\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
