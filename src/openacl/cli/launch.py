"""``openacl launch -n N app.py ARGS``: run N local ranks of a program, like torchrun.

Design note (invariants)
------------------------
* Each rank is a child process in a session of its own, with RANK, WORLD_SIZE, LOCAL_RANK,
  LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (``openacl.hccl.comm_init_from_env``
  reads them) and PYTHONUNBUFFERED=1, so its lines arrive as they are printed.
* Two threads per rank forward its stdout and stderr line by line, prefixed ``[rank R]``,
  to ours; one lock keeps lines whole. The main thread only polls the children.
* The first rank to exit non-zero decides the exit status (a rank killed by signal S counts
  as 128 + S); the others are then terminated (SIGTERM, SIGKILL after a grace period) by
  their process-group id. Past ``--timeout`` every rank is killed and the status is 124,
  as timeout(1) reports. Ctrl-C terminates the ranks and returns 130.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

from openacl.hccl.comm import free_port

POLL_INTERVAL_S = 0.05  # how often the children are polled, seconds
KILL_GRACE_S = 5.0  # time a terminated rank gets before SIGKILL, seconds
TIMEOUT_STATUS = 124  # exit status when --timeout expires (timeout(1)'s)
INTERRUPT_STATUS = 130  # exit status on Ctrl-C (128 + SIGINT)
SIGNAL_STATUS_BASE = 128  # a rank killed by signal S exits with 128 + S
DEFAULT_MASTER_ADDR = "127.0.0.1"
MAX_RANKS = 256  # most local ranks one launch starts

_print_lock = threading.Lock()


def rank_environment(rank: int, world_size: int, master_addr: str, master_port: int,
                     base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of local rank ``rank`` (torchrun's variables)."""
    env = dict(os.environ if base is None else base)
    env.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
                "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": master_addr,
                "MASTER_PORT": str(master_port), "PYTHONUNBUFFERED": "1"})
    return env


def program_command(program: str, args: Sequence[str]) -> list[str]:
    """``app.py ARGS`` runs under this Python; anything else runs as a command."""
    if program.endswith(".py"):
        return [sys.executable, program, *args]
    return [program, *args]


def _forward(stream: IO[bytes], prefix: str, out: IO[str]) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip("\n")
        with _print_lock:
            out.write(f"{prefix}{line}\n")
            out.flush()
    stream.close()


def _status(returncode: int) -> int:
    return SIGNAL_STATUS_BASE - returncode if returncode < 0 else returncode


def _signal_group(child: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(child.pid, sig)  # the child leads its own session: its group id is its pid
    except (ProcessLookupError, PermissionError):
        pass


def _stop(children: list[subprocess.Popen]) -> None:
    """Terminate every still-running rank, then kill what outlives the grace period."""
    running = [c for c in children if c.poll() is None]
    for child in running:
        _signal_group(child, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_S
    for child in running:
        try:
            child.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(child, signal.SIGKILL)
            child.wait()


def launch(world_size: int, command: Sequence[str], master_addr: str = DEFAULT_MASTER_ADDR,
           master_port: int | None = None, timeout_s: float | None = None,
           stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Run ``command`` as ``world_size`` local ranks; returns the exit status (design note)."""
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    port = free_port(master_addr) if master_port is None else master_port
    children: list[subprocess.Popen] = []
    forwarders: list[threading.Thread] = []
    status = 0
    try:
        for rank in range(world_size):
            child = subprocess.Popen(list(command), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True,
                                     env=rank_environment(rank, world_size, master_addr, port))
            children.append(child)
            for pipe, target in ((child.stdout, out), (child.stderr, err)):
                thread = threading.Thread(target=_forward, args=(pipe, f"[rank {rank}] ", target),
                                          daemon=True)
                thread.start()
                forwarders.append(thread)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            codes = [child.poll() for child in children]
            failed = [c for c in codes if c not in (None, 0)]
            if failed:
                status = _status(failed[0])
                break
            if all(code == 0 for code in codes):
                break
            if deadline is not None and time.monotonic() > deadline:
                with _print_lock:
                    err.write(f"openacl launch: timed out after {timeout_s:g} s; killing "
                              f"{sum(c is None for c in codes)} running rank(s)\n")
                status = TIMEOUT_STATUS
                break
            time.sleep(POLL_INTERVAL_S)
    except KeyboardInterrupt:
        status = INTERRUPT_STATUS
    finally:
        _stop(children)
        for thread in forwarders:
            thread.join()
    return status


def _cmd_launch(args: argparse.Namespace) -> int:
    if not 1 <= args.nproc <= MAX_RANKS:
        print(f"openacl launch: -n {args.nproc} is invalid: expected 1 .. {MAX_RANKS} ranks",
              file=sys.stderr)
        return 2
    if args.timeout is not None and args.timeout <= 0:
        print(f"openacl launch: --timeout {args.timeout:g} is invalid: expected seconds > 0",
              file=sys.stderr)
        return 2
    try:
        return launch(args.nproc, program_command(args.program, args.args), args.master_addr,
                      args.master_port, args.timeout)
    except OSError as exc:
        print(f"openacl launch: cannot start {args.program!r}: {exc}", file=sys.stderr)
        return 2


def register(commands: Any) -> None:
    """Add the ``launch`` subcommand to the ``openacl`` parser."""
    parser = commands.add_parser(
        "launch", help="run N local ranks of a program (RANK, WORLD_SIZE, MASTER_* set)",
        description="Start N local ranks of a program with torchrun's variables (RANK, "
                    "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), forward their output "
                    "prefixed by rank, and exit with the first non-zero status (the other "
                    "ranks are then stopped).")
    parser.add_argument("-n", "--nproc", type=int, required=True, metavar="N",
                        help="number of ranks")
    parser.add_argument("--master-addr", default=DEFAULT_MASTER_ADDR,
                        help=f"rendezvous address (default {DEFAULT_MASTER_ADDR})")
    parser.add_argument("--master-port", type=int, default=None,
                        help="rendezvous port (default: a free one)")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help=f"kill every rank after this long (exit status {TIMEOUT_STATUS})")
    parser.add_argument("program", help="app.py (run with this Python) or a command")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the program's arguments")
    parser.set_defaults(handler=_cmd_launch)


__all__ = ["launch", "program_command", "rank_environment", "register"]
