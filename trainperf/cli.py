"""The `trainperf` command. Thin: it parses options and calls the package; errors print without a traceback."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from trainperf import cli_list, cli_slurm, registry
from trainperf.ablation.cli import add_parser as add_ablation_parser
from trainperf.arguments import add_force_argument, whole_number
from trainperf.cli_run import add_run_arguments, benchmark_keys, suite_options
from trainperf.data.prepare import dataset_for, mini_datasets
from trainperf.errors import ProcessGroupFailed, RunFailed, Terminated, TrainperfError, UsageError
from trainperf.fileio import Output, check_outputs
from trainperf.history.cli import add_parser as add_history_parser
from trainperf.nodes import torchrun_node_args
from trainperf.paths import default_data_dir
from trainperf.report.cli import add_parser as add_report_parser
from trainperf.report.compare import add_parser as add_compare_parser
from trainperf.scaling.cli import add_parser as add_scaling_parser
from trainperf.spec import SCALES
from trainperf.submission.cli import add_parser as add_submission_parser
from trainperf.text import printable

_COUNT = whole_number(0, 1_000_000)  # nodes, GPUs or processes: the rules below each say which may be 0
_PORT = whole_number(0, 65_535)  # 0 and the rest refused by trainperf.slurm.render, naming the option

if TYPE_CHECKING:
    from trainperf.dist import DistContext
    from trainperf.harness.suite import BenchmarkSummary, SuiteOptions


def _relaunch_with_torchrun(nproc: int, node_args: list[str], stop_file_env: str) -> int:
    argv = sys.argv[1:]
    cleaned, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--nproc":
            skip = True
            continue
        if a.startswith("--nproc="):
            continue
        cleaned.append(a)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    cmd = [
        sys.executable,
        "-m",
        "trainperf.launch",  # torchrun, with a failed job told in one line (trainperf/launch.py)
        *node_args,  # --standalone on one node; the c10d rendezvous on several (trainperf/nodes.py)
        # a failed rank ends the job: a restarted worker group would redo the run with a new clock (and torchrun
        # also reads PET_MAX_RESTARTS from the environment, so say it here)
        "--max-restarts=0",
        "-m",
        "trainperf",
        *cleaned,
    ]
    # the ranks tell a SIGTERM sent to the job (kept aside, as on one process) from torchrun's after a failed rank
    stop_file = Path(tempfile.gettempdir()) / f"trainperf-stop-{os.getpid()}-{secrets.token_hex(4)}"
    env[stop_file_env] = str(stop_file)
    proc = subprocess.Popen(cmd, env=env)

    def forward(signum: int, _frame: object) -> None:  # torchrun passes it on to every rank
        stop_file.touch()
        proc.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    try:
        return proc.wait()
    except KeyboardInterrupt:  # the terminal sent SIGINT to torchrun too; wait for the ranks to log it
        try:
            return proc.wait(timeout=60) or 130
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.kill()
            return 130
    finally:
        stop_file.unlink(missing_ok=True)


def _terminated(signum: int, _frame: object) -> None:
    raise Terminated()


def cmd_run(args: argparse.Namespace) -> int:
    if args.nproc < 1:
        raise UsageError("--nproc must be at least 1")
    node_args = torchrun_node_args(  # inconsistent node options fail before anything starts
        nproc=args.nproc,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        rdzv_id=args.rdzv_id,
    )
    if args.runs < 1:
        raise UsageError("--runs must be at least 1")
    keys = benchmark_keys(args.benchmarks, args.scale, dry_run=args.dry_run, round_version=args.round)
    options = suite_options(args, keys)  # a malformed --set fails before torchrun starts

    from trainperf import dist as dist_mod  # torch: imported once the options are known good
    from trainperf.harness.suite import validate

    validate(options)  # names, the kind of run and the division's rules: before torchrun starts
    # the longest a rank may wait for another: one rank's untimed initialization, which the rules cap
    timeout_s = dist_mod.collective_timeout_s(
        60.0 * max(registry.get_spec(key, args.scale).max_init_minutes for key in keys)
    )
    if (args.nproc > 1 or args.nnodes > 1) and not dist_mod.launched_by_torchrun():
        return _relaunch_with_torchrun(args.nproc, node_args, dist_mod.STOP_FILE_ENV)

    ctx = dist_mod.init_from_env(timeout_s)
    if ctx.distributed:  # torchrun's SIGTERM means another rank failed: this run fails too (counted, aborted)
        dist_mod.stop_on_sigterm(ctx)
    else:  # a run ends on SIGTERM as it does on Ctrl-C
        signal.signal(signal.SIGTERM, _terminated)
    summaries = _run_suite_here(args, options, ctx, timeout_s)
    ok = all(r["status"] == "success" for s in summaries for r in s.runs)
    return 0 if ok or args.dry_run or args.smoke else 1


def _run_suite_here(
    args: argparse.Namespace, options: SuiteOptions, ctx: DistContext, timeout_s: float
) -> list[BenchmarkSummary]:
    """The suite on this process of the job, its results table printed on rank 0."""
    import torch  # torch and the harness: never for `trainperf --help` or options refused before torchrun
    from rich.console import Console

    from trainperf import dist as dist_mod
    from trainperf.harness.precision import resolve
    from trainperf.harness.progress import ProgressBar
    from trainperf.harness.suite import run_suite
    from trainperf.harness.switches import check_device
    from trainperf.report.table import print_summary

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // ctx.world_size))
    resolve(args.precision, scale=args.scale, device=ctx.device)  # one that this device cannot run stops here
    check_device(options.switches, ctx.device.type)  # --cuda-graphs or --pin-memory on a CPU stops here
    console = Console(stderr=False, quiet=args.quiet or not ctx.is_main)

    def observer(key: str, i: int, n: int) -> ProgressBar:
        return ProgressBar(console, f"{key} run {i + 1}/{n}")

    group_lost = completed = False
    try:
        summaries = run_suite(
            options,
            ctx,
            observer_for=observer,
            announce=lambda text: console.print(text, highlight=False, markup=False, soft_wrap=True),
        )
        completed = True
    except Exception as e:
        group_lost = ctx.distributed and dist_mod.is_peer_failure(e)
        if group_lost:  # a clear error instead of the backend's traceback; the group is unusable: no shutdown
            raise dist_mod.peer_failure(ctx, e.__cause__ if isinstance(e, RunFailed) else e, timeout_s) from None
        raise
    finally:
        if not group_lost:
            dist_mod.shutdown(ctx, completed=completed)
    if ctx.is_main:
        print_summary(console, summaries, options)
    return summaries


def cmd_data(args: argparse.Namespace) -> int:
    from rich.console import Console  # rich: 35 ms to import, not for `trainperf --help`

    console = Console()
    keys = args.benchmarks or list(mini_datasets())
    if keys == ["all"]:
        keys = list(mini_datasets())
    failed = False
    for key in keys:
        ds = dataset_for(key)
        if args.action == "prepare":
            with console.status(f"preparing {key}: {ds.description}"):
                written = ds.prepare(args.data_dir)
            problems = ds.verify(args.data_dir)
            state = f"{len(written)} file(s) written" if written else "already prepared"
        else:
            problems = ds.verify(args.data_dir)
            state = "verified"
        if problems:
            failed = True
            fix = ds.fix or f"run `trainperf data prepare {key}`"
            console.print(f"[red]✗ {key}[/red]: " + "; ".join(problems) + f" — {fix}")
        else:
            console.print(f"[green]✓ {key}[/green]: {state} in {args.data_dir}")
    return 1 if failed else 0


def cmd_system(args: argparse.Namespace) -> int:
    # the system description and the host probe (psutil): 20 ms to import, not for `trainperf --help`
    from trainperf.system import SYSTEM_MARK, check_system_file, describe_system, write_system

    if args.output is not None:
        check_outputs([Output(args.output, "-o", SYSTEM_MARK)], force=args.force)
    desc = describe_system(
        org=args.org, division=args.division or "open", availability=args.availability, system_name=args.system_name
    )
    if args.output is None:
        print(json.dumps(desc, indent=2))
        return 0
    path = write_system(desc, args.output)
    problems = check_system_file(path)
    if problems:
        print(f"{path}: the official system_desc_checker found problems:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    print(f"{path}: written; passes mlperf_logging.system_desc_checker (training 4.0.0)")
    return 0


def cmd_slurm(args: argparse.Namespace) -> int:
    run_args = list(args.run_args)  # the options after -- (main() passes them on)
    if run_args[:1] == ["--"]:
        run_args = run_args[1:]
    try:  # a bad run option fails now, not in the job (argparse has printed its error)
        run = build_parser().parse_args(["run", *args.benchmarks, *run_args])
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    return cli_slurm.write_job(args, run_args, run)


def cmd_check(args: argparse.Namespace) -> int:
    from rich.console import Console  # rich: 35 ms to import, not for `trainperf --help`
    from rich.markup import escape

    from trainperf.rules.compliance import check_log  # 80 ms to import: not for every command

    console = Console()
    failed = 0
    notes = []
    for log in args.logs:
        res = check_log(log, scale=args.scale, ruleset=args.ruleset)
        rules = f"ruleset {res.ruleset}" + (" + trainperf mini rules" if res.scale == "mini" else "")
        about = escape(printable(f"{log} ({res.benchmark}, {res.scale}, {rules})"))  # the values come from the log
        warned = f" [yellow]({len(res.warnings)} warning(s))[/yellow]" if res.warnings else ""
        if res.passed:
            console.print(f"[green]PASS[/green] {about}{warned}")
        else:
            failed += 1
            console.print(f"[red]FAIL[/red] {about}{warned}")
            for p in res.problems:
                console.print(f"  - {printable(p)}", highlight=False, markup=False)
        for w in res.warnings:  # the official checker's own warnings: the log passes them, but they are shown
            console.print(f"  warning: {printable(w)}", highlight=False, markup=False)
        if args.verbose:
            console.print(printable(res.raw), highlight=False, markup=False)
        notes += [res.confinement] if res.confinement else []
    for note in dict.fromkeys(notes):
        console.print(f"official checker: {note}", highlight=False, markup=False)
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="trainperf",
        description="Time-to-train benchmarks built the way MLPerf Training v2.0 is built: each benchmark "
        "trains from a fixed start to a quality target; the result is the minutes from run_start to "
        "run_stop; several runs are combined by olympic scoring.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common, sysopts = _shared_options()
    _add_run(sub, [common, sysopts])
    _add_data(sub, [common])
    _add_system(sub, [sysopts])
    cli_slurm.add_parser(sub, cmd_slurm)
    _add_check(sub)
    add_report_parser(sub)
    add_compare_parser(sub)  # `trainperf compare A B`
    add_submission_parser(sub)
    add_history_parser(sub)
    add_scaling_parser(sub)  # `trainperf scale`
    add_ablation_parser(sub)  # `trainperf ablate`
    cli_list.add_parser(sub)  # `trainperf list`
    return p


def _shared_options() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The options several commands take: (the data folder, the system's)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-dir",
        type=Path,
        default=default_data_dir(),
        help="where datasets live (default: $TRAINPERF_DATA_DIR or ~/.cache/trainperf/data)",
    )
    sysopts = argparse.ArgumentParser(add_help=False)
    sysopts.add_argument("--org", default="trainperf-user", help="submitting organization (submission_org)")
    sysopts.add_argument(
        "--division",
        choices=("closed", "open"),
        default=None,
        help="closed: reference model and rule-listed hyperparameters only; open: anything "
        "(default: closed at the reference scale, open at the mini scale)",
    )
    sysopts.add_argument(
        "--availability",
        choices=("available", "cloud", "preview", "research"),
        default="available",
        help="availability category of the system",
    )
    sysopts.add_argument(
        "--system-name", default=None, help="name of the system (default: derived from the hardware, e.g. 1xCPU-2c-...)"
    )
    return common, sysopts


def _add_run(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    r = sub.add_parser(
        "run",
        parents=parents,
        help="run benchmarks and score them",
        description="Run benchmarks: N timed runs each, result files in the MLCommons layout, "
        "olympic scoring and a results table. An interrupted suite resumes where it stopped.",
    )
    add_run_arguments(r)
    r.set_defaults(func=cmd_run)


def _add_data(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    d = sub.add_parser(
        "data",
        parents=parents,
        help="prepare or verify the mini datasets",
        description="Build the mini datasets offline (from Debian packages and generators) "
        "and check them against their checksums.",
    )
    d.add_argument("action", choices=("prepare", "verify"))
    d.add_argument("benchmarks", nargs="*", metavar="BENCHMARK", help="benchmark keys (default: all)")
    d.set_defaults(func=cmd_data)


def _add_system(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "system",
        parents=parents,
        help="describe this machine (MLCommons systems/<name>.json)",
        description="Capture this machine into the MLCommons system description format and, "
        "with -o, check it with the official system_desc_checker.",
    )
    s.add_argument("-o", "--output", type=Path, default=None, help="write the JSON here (default: print it)")
    add_force_argument(s)
    s.set_defaults(func=cmd_system)


def _add_check(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "check",
        help="check MLLOG files with the official compliance checker",
        description="Run mlperf_logging.compliance_checker on result logs: for reference runs the ruleset of "
        "the log's round (--ruleset/--round, else its benchmark's round for trainperf's logs, else the round of the "
        "results repository it is in or of its date and benchmark), the official common rules plus trainperf's "
        "mini rules for mini runs.",
    )
    c.add_argument("logs", nargs="+", type=Path, metavar="LOG")
    c.add_argument("--scale", choices=SCALES, default=None, help="override the scale read from the log")
    c.add_argument("-v", "--verbose", action="store_true", help="also print the checker's own output")
    c.add_argument(
        "--ruleset",
        "--round",
        metavar="X.Y.Z",
        help="the MLPerf Training round (ruleset) to check reference logs by, e.g. 1.1.0 or 6.1 (default: the log's "
        "own round: its benchmark's for trainperf's logs)",
    )
    c.set_defaults(func=cmd_check)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:  # argparse has printed its error (a bad option, a number out of its range) or the help
        args, extra = parser.parse_known_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    if getattr(args, "func", None) is cmd_slurm:
        args.run_args = extra  # `trainperf slurm BENCHMARK … -- RUN_OPTIONS`: the options of the run it writes
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args)
    except TrainperfError as e:
        print(f"trainperf: error: {printable(str(e))}", file=sys.stderr)  # it may quote a file's or folder's name
        if isinstance(e, ProcessGroupFailed):  # the group is gone: exit now, without the shutdown noise it causes
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(e.exit_code)
        return e.exit_code
    except KeyboardInterrupt:
        print("trainperf: interrupted", file=sys.stderr)
        return 130
