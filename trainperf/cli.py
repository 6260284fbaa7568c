"""The `trainperf` command. Thin: it parses options and calls the package; errors print without a traceback."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from trainperf.errors import ProcessGroupFailed, RunFailed, TrainperfError, UsageError
from trainperf.paths import DEFAULT_OUT, default_data_dir
from trainperf.registry import BENCHMARKS
from trainperf.spec import SCALES


def _benchmarks(names: list[str], scale: str, dry_run: bool = True) -> tuple[str, ...]:
    from trainperf import registry

    if not names or names == ["all"]:  # all that run this kind of run
        keys = [k for k in registry.available(scale) if dry_run or not registry.get_spec(k, scale).dry_run_only]
        if not keys:
            raise UsageError(f"no benchmark has a {scale} scale yet")
        return tuple(keys)
    for name in names:
        registry.get_spec(name, scale)  # unknown or unavailable -> clear error
    return tuple(dict.fromkeys(names))


def cmd_list(args: argparse.Namespace) -> int:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from trainperf import registry

    table = Table(title="trainperf benchmarks (models and data: trainperf list --details)", box=box.SIMPLE)
    for col in ("benchmark", "scale", "status", "target", "SE", "runs", "unit", "evaluated", "budget"):
        table.add_column(col, no_wrap=col in ("benchmark", "scale", "unit"))
    details, notes = [], []
    for bench in registry.all_benchmarks():
        for scale, spec in bench.specs.items():
            status = "ready" if bench.available_at(scale) and not spec.dry_run_only else "not available yet"
            if bench.available_at(scale) and spec.dry_run_only:
                notes.append(f"{bench.key} {scale}: not available yet, dry run only: {spec.dry_run_only}")
            runs = f"{spec.runs_required} (-{spec.runs_dropped}-{spec.runs_dropped})"
            recipe = bench.recipes.get(scale)
            by_recipe = " (by recipe)" if callable(spec.max_progress) and recipe is not None else ""
            budget = (
                f"{_figure_text(spec.max_progress, recipe, spec.budget)}{by_recipe} (guard {spec.max_minutes:g} min)"
            )
            table.add_row(
                bench.key,
                scale,
                status,
                spec.target_text,
                spec.metric_se_text,
                runs,
                spec.unit,
                _schedule_text(spec, recipe),
                budget,
            )
            details.append(f"{bench.key} ({scale}, {bench.title}): {spec.model}; data: {spec.dataset}")
    from trainperf.report.table import for_output

    console = for_output(Console())  # piped: whole rows, as wide as they are
    console.print(table)
    console.print(
        "SE: bootstrap standard error of the (headline) metric over evaluation samples, measured at the target "
        "(benchmarks/metric_error.py); — : not measured",
        highlight=False,
    )
    for line in notes:
        console.print(line, highlight=False)
    if args.details:
        for line in details:
            console.print(line, highlight=False)
    return 0


def _schedule_text(spec, recipe) -> str:
    """When a spec evaluates, in its own unit; figures computed from the recipe (the batch size) are shown for the
    default recipe and marked so."""
    every = _figure_text(spec.eval_interval, recipe, spec.interval)
    first = "" if spec.first_eval is None else f" from {_figure_text(spec.first_eval, recipe, spec.first)}"
    by_recipe = callable(spec.eval_interval) or callable(spec.first_eval)
    return f"every {every}{first}" + (" (by recipe)" if by_recipe and recipe is not None else "")


def _figure_text(value, recipe, of_recipe) -> str:
    """A schedule figure: a number as it is; a function of the recipe as its value for the default recipe."""
    if not callable(value):
        return f"{value:g}"
    return "by recipe" if recipe is None else f"{of_recipe(recipe):g}"


def _relaunch_with_torchrun(nproc: int, node_args: list[str]) -> int:
    import subprocess

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
    proc = subprocess.Popen(cmd, env=env)

    def forward(signum: int, _frame: object) -> None:  # torchrun passes it on to every rank
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


def _terminated(signum: int, _frame: object) -> None:
    from trainperf.errors import Terminated

    raise Terminated()


def cmd_run(args: argparse.Namespace) -> int:
    if args.nproc < 1:
        raise UsageError("--nproc must be at least 1")
    from trainperf.nodes import torchrun_node_args

    node_args = torchrun_node_args(  # inconsistent node options fail before anything starts
        nproc=args.nproc,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        rdzv_id=args.rdzv_id,
    )
    if args.runs < 1:
        raise UsageError("--runs must be at least 1")
    keys = _benchmarks(args.benchmarks, args.scale, dry_run=args.dry_run)
    from trainperf import dist as dist_mod
    from trainperf import registry
    from trainperf.rules.closed import parse_overrides
    from trainperf.system import check_org_name, check_system_name

    parse_overrides(args.set)  # a malformed --set fails before torchrun starts
    if args.system_name is not None:  # names become files and folders: checked before anything is written
        check_system_name(args.system_name)
    check_org_name(args.org)
    # the longest a rank may wait for another: one rank's untimed initialization, which the rules cap
    timeout_s = dist_mod.collective_timeout_s(
        60.0 * max(registry.get_spec(key, args.scale).max_init_minutes for key in keys)
    )

    from trainperf.harness.suite import SuiteOptions, check_kind

    check_kind(  # a kind of run a benchmark does not take fails before torchrun starts
        SuiteOptions(
            benchmarks=keys,
            scale=args.scale,
            runs=1,
            out=args.out,
            data_dir=args.data_dir,
            dry_run=args.dry_run,
            smoke=args.smoke,
        )
    )

    if (args.nproc > 1 or args.nnodes > 1) and not dist_mod.launched_by_torchrun():
        return _relaunch_with_torchrun(args.nproc, node_args)

    import torch
    from rich.console import Console

    from trainperf.harness.progress import ProgressBar
    from trainperf.harness.suite import SuiteOptions, run_suite
    from trainperf.report.table import print_summary

    ctx = dist_mod.init_from_env(timeout_s)
    if ctx.distributed:  # torchrun's SIGTERM means another rank failed: this run fails too (counted, aborted)
        dist_mod.stop_on_sigterm(ctx)
    else:  # a run ends on SIGTERM as it does on Ctrl-C
        signal.signal(signal.SIGTERM, _terminated)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // ctx.world_size))
    from trainperf.harness.precision import resolve

    resolve(args.precision, scale=args.scale, device=ctx.device)  # one that this device cannot run stops here
    from trainperf.harness import switches

    run_switches = switches.from_args(args)
    switches.check_device(run_switches, ctx.device.type)  # --cuda-graphs or --pin-memory on a CPU stops here
    console = Console(stderr=False, quiet=args.quiet or not ctx.is_main)
    options = SuiteOptions(
        benchmarks=keys,
        scale=args.scale,
        runs=args.runs,
        out=args.out,
        data_dir=args.data_dir,
        seed=args.seed,
        division=args.division or ("closed" if args.scale == "reference" else "open"),
        org=args.org,
        availability=args.availability,
        system_name=args.system_name,
        dry_run=args.dry_run,
        smoke=args.smoke,
        drop_caches=args.drop_caches,
        overrides=tuple(parse_overrides(args.set).items()),
        precision=args.precision,
        switches=run_switches,
    )

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
    ok = all(r["status"] == "success" for s in summaries for r in s.runs)
    return 0 if ok or args.dry_run or args.smoke else 1


def cmd_data(args: argparse.Namespace) -> int:
    from rich.console import Console

    from trainperf.data.prepare import dataset_for, mini_datasets

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
    from trainperf.system import check_system_file, describe_system, write_system

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
    from trainperf import slurm
    from trainperf.system import NOT_APPLICABLE, UNKNOWN, check_system_file, describe_system, write_system

    benchmarks = list(args.benchmarks)
    run_args = list(args.run_args)  # the options after -- (main() passes them on)
    if run_args[:1] == ["--"]:
        run_args = run_args[1:]
    slurm.check_run_args(run_args)
    run = build_parser().parse_args(["run", *benchmarks, *run_args])  # a bad option fails now, not in the job
    _benchmarks(run.benchmarks, run.scale, dry_run=run.dry_run)
    gpus = args.gpus_per_node
    text = slurm.render(
        benchmarks=benchmarks,
        run_args=run_args,
        nodes=args.nodes,
        nproc_per_node=args.nproc_per_node or max(1, gpus),
        gpus_per_node=gpus,
        port=args.port,
        job_name=args.job_name,
        time_limit=args.time,
        partition=args.partition,
        account=args.account,
    )
    script = slurm.write_script(text, args.output)
    desc = describe_system(
        org=run.org,
        division=run.division or ("closed" if run.scale == "reference" else "open"),
        availability=run.availability,
        system_name=run.system_name,
        nodes=args.nodes,
    )
    if gpus and desc["accelerators_per_node"] != str(gpus):  # this host is not a compute node: say what is asked
        desc = {k: UNKNOWN if v == NOT_APPLICABLE and k.startswith("accelerator") else v for k, v in desc.items()}
        desc["accelerators_per_node"] = str(gpus)
        desc["hw_notes"] += f" Host fields describe {os.uname().nodename}, where the job was written, not its nodes."
    system_path = write_system(desc, args.output.with_name(args.output.name + ".system.json"))
    problems = check_system_file(system_path)
    print(f"{script}: written; submit it with `sbatch {script}` ({args.nodes} node(s), one torchrun agent each)")
    print(
        f"{system_path}: the system for {args.nodes} node(s) as seen from this host"
        + ("" if not problems else f"; the official system_desc_checker found problems: {'; '.join(problems)}")
        + ". The run writes the description of its own nodes under its --out folder"
    )
    return 1 if problems else 0


def cmd_check(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from trainperf.rules.compliance import check_log
    from trainperf.text import printable

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

    r = sub.add_parser(
        "run",
        parents=[common, sysopts],
        help="run benchmarks and score them",
        description="Run benchmarks: N timed runs each, result files in the MLCommons layout, "
        "olympic scoring and a results table. An interrupted suite resumes where it stopped.",
    )
    r.add_argument(
        "benchmarks",
        nargs="*",
        metavar="BENCHMARK",
        help=f"benchmark keys ({', '.join(BENCHMARKS)}) or 'all' (default: all available)",
    )
    r.add_argument(
        "--scale",
        choices=SCALES,
        default="mini",
        help="mini: CPU, minutes, offline data; reference: the MLPerf v2.0 model and data",
    )
    r.add_argument(
        "--runs",
        type=int,
        default=1,
        help="runs per benchmark (default 1: a quick preview; a valid score needs the count of the rules, "
        "shown by `trainperf list`)",
    )
    r.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default: {DEFAULT_OUT})")
    r.add_argument(
        "--seed",
        type=int,
        default=None,
        help="make the runs reproducible: run i uses seed SEED+i, logged as a fixed seed (default: each run "
        "draws its seed from the system's randomness and logs it, as MLPerf's closed division requires)",
    )
    r.add_argument(
        "--nproc", type=int, default=1, help="processes to launch with torchrun (gloo on CPU, NCCL on GPU); default 1"
    )
    r.add_argument(
        "--nnodes",
        type=int,
        default=1,
        help="nodes of the job (default 1): start the same command on each node with its --node-rank and the same "
        "--rdzv-endpoint; --nproc processes run on each node (torchrun's c10d rendezvous)",
    )
    r.add_argument("--node-rank", type=int, default=None, help="this node's number, 0..NNODES-1 (with --nnodes)")
    r.add_argument(
        "--rdzv-endpoint",
        default=None,
        metavar="HOST:PORT",
        help="where the nodes meet (with --nnodes): the first node's address and a free port, the same on every node",
    )
    r.add_argument(
        "--rdzv-id",
        default=None,
        help="the job's rendezvous id, the same on every node (default: trainperf); "
        "distinct for jobs sharing an endpoint",
    )
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="a few steps on synthetic data at full model size, to check the path and the log",
    )
    r.add_argument(
        "--smoke",
        action="store_true",
        help="reference scale: check a machine and the data path on a tiny fixture that trainperf writes in the "
        "reference's on-disk format under OUT/smoke-data (the real loader, a few real training steps at the dry "
        "run's batch size, one full evaluation); not a result",
    )
    r.add_argument(
        "--precision",
        choices=("auto", "fp32", "bf16", "fp16"),
        default="auto",
        help="autocast of the training step, logged as trainperf_precision / trainperf_autocast. auto (default): "
        "bf16 for reference runs on a CUDA GPU with bf16 (fp16 with a loss scaler on older GPUs), as MLPerf "
        "reference and top submissions train; fp32 for mini runs and on CPUs. bf16 also runs on a CPU when asked; "
        "fp16 needs CUDA. Evaluation stays fp32",
    )
    from trainperf.harness.switches import add_arguments as add_switch_arguments

    add_switch_arguments(r)  # --compile, --channels-last, --cuda-graphs, --optimizer-impl, ... (harness/switches.py)
    r.add_argument(
        "--drop-caches",
        action="store_true",
        help="drop the OS page cache before each run (needs root), logged as cache_clear",
    )
    r.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a hyperparameter of the default recipe (repeatable). Closed division: only the keys the "
        "rules list as tunable, within their allowed values; open: any recipe key",
    )
    r.add_argument("--quiet", action="store_true", help="print nothing but errors")
    r.set_defaults(func=cmd_run)

    d = sub.add_parser(
        "data",
        parents=[common],
        help="prepare or verify the mini datasets",
        description="Build the mini datasets offline (from Debian packages and generators) "
        "and check them against their checksums.",
    )
    d.add_argument("action", choices=("prepare", "verify"))
    d.add_argument("benchmarks", nargs="*", metavar="BENCHMARK", help="benchmark keys (default: all)")
    d.set_defaults(func=cmd_data)

    s = sub.add_parser(
        "system",
        parents=[sysopts],
        help="describe this machine (MLCommons systems/<name>.json)",
        description="Capture this machine into the MLCommons system description format and, "
        "with -o, check it with the official system_desc_checker.",
    )
    s.add_argument("-o", "--output", type=Path, default=None, help="write the JSON here (default: print it)")
    s.set_defaults(func=cmd_system)

    sl = sub.add_parser(
        "slurm",
        help="write an sbatch script that runs benchmarks on N nodes (srun, one torchrun agent per node)",
        description="Write an sbatch script that launches `trainperf run BENCHMARK… RUN_OPTIONS` on N nodes with "
        "srun: one torchrun agent per node, meeting at the first node of the allocation (c10d rendezvous). Run "
        f"options go after --, e.g. `trainperf slurm {BENCHMARKS[0]} --nodes 4 --gpus-per-node 8 -o job.sbatch "
        "-- --scale reference --runs 5`.",
    )
    sl.add_argument(
        "benchmarks",
        nargs="*",
        metavar="BENCHMARK [-- RUN_OPTIONS]",
        help="benchmark keys or 'all' (as for run); after --, options for trainperf run",
    )
    sl.add_argument("-o", "--output", type=Path, required=True, help="the sbatch script to write")
    sl.add_argument("--nodes", type=int, required=True, help="nodes of the job (#SBATCH --nodes)")
    sl.add_argument("--gpus-per-node", type=int, default=0, help="GPUs per node (#SBATCH --gpus-per-node; 0: CPU)")
    sl.add_argument("--nproc-per-node", type=int, default=None, help="processes per node (default: one per GPU, or 1)")
    sl.add_argument("--port", type=int, default=29500, help="rendezvous port on the first node (default 29500)")
    sl.add_argument("--job-name", default=None, help="#SBATCH --job-name (default: trainperf-BENCHMARKS)")
    sl.add_argument("--time", default=None, help="#SBATCH --time, e.g. 02:00:00")
    sl.add_argument("--partition", default=None, help="#SBATCH --partition")
    sl.add_argument("--account", default=None, help="#SBATCH --account")
    sl.set_defaults(func=cmd_slurm)

    c = sub.add_parser(
        "check",
        help="check MLLOG files with the official compliance checker",
        description="Run mlperf_logging.compliance_checker on result logs: for reference runs the ruleset of "
        "the log's round (--ruleset, else 2.0.0 for trainperf's logs, else the round of the results repository it is "
        "in or of its date and benchmark), the official common rules plus trainperf's mini rules for mini runs.",
    )
    c.add_argument("logs", nargs="+", type=Path, metavar="LOG")
    c.add_argument("--scale", choices=SCALES, default=None, help="override the scale read from the log")
    c.add_argument("-v", "--verbose", action="store_true", help="also print the checker's own output")
    c.add_argument(
        "--ruleset",
        metavar="X.Y.Z",
        help="the MLPerf Training ruleset to check reference logs by, e.g. 1.1.0 (default: the log's own round)",
    )
    c.set_defaults(func=cmd_check)

    from trainperf.history.cli import add_parser as add_history_parser
    from trainperf.report.cli import add_parser as add_report_parser
    from trainperf.scaling.cli import add_parser as add_scaling_parser
    from trainperf.submission.cli import add_parser as add_submission_parser

    add_report_parser(sub)
    from trainperf.report.compare import add_parser as add_compare_parser

    add_compare_parser(sub)  # `trainperf compare A B`
    add_submission_parser(sub)
    add_history_parser(sub)
    add_scaling_parser(sub)  # `trainperf scale`
    from trainperf.ablation.cli import add_parser as add_ablation_parser

    add_ablation_parser(sub)  # `trainperf ablate`

    ls = sub.add_parser(
        "list",
        help="list the benchmarks, their scales, targets, run counts and evaluation schedules",
        description="Every MLPerf benchmark key at each scale: whether trainperf runs it yet, the quality "
        "target, the runs olympic scoring needs, and when it evaluates (in its progress unit) within its budget.",
    )
    ls.add_argument("--details", action="store_true", help="also print each benchmark's model and dataset")
    ls.set_defaults(func=cmd_list)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if getattr(args, "func", None) is cmd_slurm:
        args.run_args = extra  # `trainperf slurm BENCHMARK … -- RUN_OPTIONS`: the options of the run it writes
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args)
    except TrainperfError as e:
        print(f"trainperf: error: {e}", file=sys.stderr)
        if isinstance(e, ProcessGroupFailed):  # the group is gone: exit now, without the shutdown noise it causes
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(e.exit_code)
        return e.exit_code
    except KeyboardInterrupt:
        print("trainperf: interrupted", file=sys.stderr)
        return 130
