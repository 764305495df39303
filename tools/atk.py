"""CANN's ATK operator cases: fetch them, sample them for CI, run them all into a table.

CANN's operator repositories (hicann/ops-math, hicann/ops-nn) keep an ATK case file per
operator (``<op>/tests/**/atk_aclnn<Op>.json``). This tool reads them at the commits
pinned in ``REPOSITORIES`` (recorded in everything it writes), from a local clone or bare
git directory (``--repo NAME=DIR``), else from a blobless clone it makes in the cache
(``git clone --bare --filter=blob:none``, then the ATK blobs only: about 90 MB).

Commands::

    python tools/atk.py fetch [--repo ops-math=DIR] [--repo ops-nn=DIR]
        # every ATK file into ~/.cache/openacl/atk/<repository>/<commit>/ (as in the repo)
    python tools/atk.py sample [--per-suite 8]
        # tests/data/atk/sample.json.xz: a few small cases of every suite, spread over the
        # dtypes and precision standards it has (what CI's tests/test_atk.py runs)
    python tools/atk.py run [--ops A,B] [--max-cases N] [--markdown docs/atk.md]
        # every fetched case (or N per suite) through tests/atk_driver.py; prints and
        # writes the table: suite, cases, run, passed, not run (why)

The cache folder follows ``OPENACL_CACHE`` like the model zoo (``openacl.cli.zoo``).
"""

from __future__ import annotations

import argparse
import collections
import json
import lzma
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "src")]

import atk_driver  # noqa: E402


@dataclass(frozen=True)
class Repository:
    """One of CANN's operator repositories, pinned."""

    name: str
    url: str
    commit: str


REPOSITORIES = (
    Repository("ops-math", "https://github.com/hicann/ops-math",
               "c41933244c31e44fd496e3bb3212164f8c48c214"),
    Repository("ops-nn", "https://github.com/hicann/ops-nn",
               "e5c3fa9327ea95ba26d06227e746923580d10921"),
)
ATK_PREFIX, ATK_SUFFIX = "atk_aclnn", ".json"
PER_SUITE = 8  # sample cases per suite
SAMPLE_MAX_ELEMENTS = 1 << 20  # largest tensor input of a sampled case, elements
GIT_TIMEOUT_S = 600


def cache_root() -> Path:
    from openacl.cli.zoo import cache_dir

    return Path(cache_dir()).parent / "atk"


def _git(git_dir: Path, *args: str, text: bool = True) -> Any:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True,
                          capture_output=True, text=text, timeout=GIT_TIMEOUT_S).stdout


def _git_dir(path: Path) -> Path:
    """The git directory of a clone (``path/.git``) or of a bare repository (``path``)."""
    return path / ".git" if (path / ".git").exists() else path


def _blobless_clone(repo: Repository) -> Path:
    target = cache_root() / "git" / f"{repo.name}.git"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "--bare", "--filter=blob:none", "--quiet", repo.url,
                        str(target)], check=True, timeout=GIT_TIMEOUT_S)
    return target


def atk_paths(git_dir: Path, commit: str) -> list[str]:
    names = _git(git_dir, "ls-tree", "-r", "--name-only", commit).split("\n")
    return sorted(n for n in names if Path(n).name.startswith(ATK_PREFIX)
                  and n.endswith(ATK_SUFFIX))


def fetch(sources: dict[str, Path]) -> dict[str, Path]:
    """Write every ATK file of each repository into the cache; returns the folders."""
    folders = {}
    for repo in REPOSITORIES:
        git_dir = _git_dir(sources[repo.name]) if repo.name in sources else _blobless_clone(
            repo)
        folder = cache_root() / repo.name / repo.commit
        paths = atk_paths(git_dir, repo.commit)
        for path in paths:
            target = folder / path
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                scratch = target.with_suffix(".part")
                scratch.write_bytes(_git(git_dir, "show", f"{repo.commit}:{path}", text=False))
                os.replace(scratch, target)
        print(f"{repo.name} {repo.commit[:12]}: {len(paths)} ATK files in {folder}")
        folders[repo.name] = folder
    return folders


def fetched_cases() -> list[atk_driver.Case]:
    """Every case of the fetched files (``fetch`` first)."""
    cases = []
    for repo in REPOSITORIES:
        folder = cache_root() / repo.name / repo.commit
        if not folder.exists():
            raise SystemExit(f"{folder} is missing: run `python tools/atk.py fetch` first")
        for path in sorted(folder.rglob(f"{ATK_PREFIX}*{ATK_SUFFIX}")):
            data = json.loads(path.read_text(encoding="utf-8"))
            cases.extend(atk_driver.cases_of(f"{repo.name}:{path.relative_to(folder)}", data))
    return cases


def _largest_tensor(case: atk_driver.Case) -> int:
    largest = 0
    for entry in case.data["inputs"]:
        for item in entry if isinstance(entry, list) else [entry]:
            if isinstance(item, dict) and item.get("shape"):
                count = 1
                for dim in item["shape"]:
                    count *= int(dim)
                largest = max(largest, count)
    return largest


def _signature(case: atk_driver.Case) -> tuple:
    """What distinguishes cases for the sample: tensor dtypes and the standard."""
    dtypes = []
    for entry in case.data["inputs"]:
        for item in entry if isinstance(entry, list) else [entry]:
            if isinstance(item, dict) and item.get("type") in ("tensor", "tensors"):
                dtypes.append(str(item.get("dtype")))
    return (case.standard, tuple(dtypes))


def sample(cases: list[atk_driver.Case], per_suite: int) -> list[atk_driver.Case]:
    """Up to ``per_suite`` cases per suite: the smallest case of each distinct signature,
    round robin over the signatures, small cases only."""
    chosen = []
    for _, suite in atk_driver.by_suite(cases):
        groups: dict[tuple, list[atk_driver.Case]] = collections.defaultdict(list)
        for case in suite:
            if _largest_tensor(case) <= SAMPLE_MAX_ELEMENTS:
                groups[_signature(case)].append(case)
        queues = [sorted(g, key=lambda c: (_largest_tensor(c), c.index))
                  for _, g in sorted(groups.items(), key=lambda kv: repr(kv[0]))]
        picked: list[atk_driver.Case] = []
        while len(picked) < per_suite and any(queues):
            for queue in queues:
                if queue and len(picked) < per_suite:
                    picked.append(queue.pop(0))
        chosen.extend(sorted(picked, key=lambda c: c.index))
    return chosen


def write_sample(cases: list[atk_driver.Case], path: Path) -> None:
    payload = {
        "repositories": {r.name: {"url": r.url, "commit": r.commit} for r in REPOSITORIES},
        "made_by": "python tools/atk.py sample",
        "cases": [{"op": c.op, "source": c.source, "index": c.index, "case": c.data}
                  for c in cases],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with lzma.open(path, "wt", encoding="utf-8", preset=9) as handle:
        json.dump(payload, handle, separators=(",", ":"), sort_keys=True)
    print(f"{len(cases)} cases of {len({c.key for c in cases})} suites -> {path} "
          f"({path.stat().st_size >> 10} KiB)")


def run(cases: list[atk_driver.Case], ops: set[str] | None, max_cases: int | None
        ) -> list[tuple[str, int, atk_driver.Tally]]:
    import openacl

    atk_driver.load_goldens()
    rows = []
    openacl.init()
    try:
        openacl.rt.set_device(0)
        for key, suite in atk_driver.by_suite(cases):
            if ops and suite[0].op not in ops and key not in ops:
                continue
            chosen = suite[:max_cases] if max_cases else suite
            start = time.perf_counter()
            tally = atk_driver.run_suite(chosen)
            rows.append((key, len(chosen), tally))
            print(f"{key:40s} {len(chosen):5d} run {tally.run:5d} passed {tally.passed:5d}"
                  f" ({time.perf_counter() - start:.1f} s)", flush=True)
    finally:
        openacl.finalize()
    return rows


def family(case: atk_driver.Case) -> str:
    """A case's family: the top folder of its ATK file in CANN's repository (activation,
    foreach, math, ...)."""
    return case.source.split(":", 1)[1].split("/", 1)[0]


def family_table(cases: list[atk_driver.Case],
                 rows: list[tuple[str, int, atk_driver.Tally]]) -> str:
    """Per family: operators with ATK suites, how many OpenACL implements, cases run and
    passed (of the cases ``rows`` covered)."""
    from openacl.ops import REGISTRY

    tallies = {key: tally for key, _, tally in rows}
    operators: dict[str, set[str]] = collections.defaultdict(set)
    counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for key, suite in atk_driver.by_suite(cases):
        name = family(suite[0])
        operators[name].add(suite[0].op)
        if key in tallies:
            counts[name][0] += tallies[key].run
            counts[name][1] += tallies[key].passed
    lines = ["| family | operators | implemented | cases run | passed |",
             "|---|---|---|---|---|"]
    total = [0, 0, 0, 0]
    for name in sorted(operators):
        implemented = len({op for op in operators[name] if op in REGISTRY})
        run_count, passed = counts[name]
        lines.append(f"| {name} | {len(operators[name])} | {implemented} | {run_count} | "
                     f"{passed} |")
        for index, value in enumerate((len(operators[name]), implemented, run_count, passed)):
            total[index] += value
    lines.append(f"| all | {total[0]} | {total[1]} | {total[2]} | {total[3]} |")
    return "\n".join(lines)


def table(rows: list[tuple[str, int, atk_driver.Tally]]) -> str:
    lines = ["| suite | cases | run | passed | not run (why) |", "|---|---|---|---|---|"]
    for key, count, tally in rows:
        why = "; ".join(f"{n}: {reason}" for reason, n in sorted(tally.not_run.items()))
        lines.append(f"| {key} | {count} | {tally.run} | {tally.passed} | {why} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/atk.py", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    fetch_cmd = commands.add_parser("fetch", help="read the ATK files into the cache")
    fetch_cmd.add_argument("--repo", action="append", default=[], metavar="NAME=DIR",
                           help="a local clone or git directory of ops-math / ops-nn")
    sample_cmd = commands.add_parser("sample", help="write the CI sample")
    sample_cmd.add_argument("--per-suite", type=int, default=PER_SUITE)
    sample_cmd.add_argument("--output", type=Path, default=atk_driver.SAMPLE)
    run_cmd = commands.add_parser("run", help="run the fetched cases, print the table")
    run_cmd.add_argument("--ops", default="", help="comma-separated operators or suites")
    run_cmd.add_argument("--max-cases", type=int, default=None, help="per suite")
    run_cmd.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.command == "fetch":
        sources = {}
        for item in args.repo:
            name, _, folder = item.partition("=")
            if name not in {r.name for r in REPOSITORIES} or not folder:
                parser.error(f"--repo {item!r}: expected ops-math=DIR or ops-nn=DIR")
            sources[name] = Path(folder)
        fetch(sources)
    elif args.command == "sample":
        write_sample(sample(fetched_cases(), args.per_suite), args.output)
    else:
        ops = {o.strip() for o in args.ops.split(",") if o.strip()} or None
        cases = fetched_cases()
        rows = run(cases, ops, args.max_cases)
        text = family_table(cases, rows) + "\n\n" + table(rows)
        print(text)
        if args.markdown:
            args.markdown.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
