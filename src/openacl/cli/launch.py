"""``openacl launch -n N app.py ARGS``: run N local ranks of a program, like torchrun.

Design note (invariants)
------------------------
* Each rank is a child process in a session of its own, with RANK, WORLD_SIZE, LOCAL_RANK,
  LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT set
  (``openacl.hccl.comm_init_from_env`` reads them) and PYTHONUNBUFFERED=1, so its lines
  arrive as they are printed.
* Several machines (``--nnodes M --node-rank K``), as torchrun's static rendezvous: one
  launcher per machine, each starting its N local ranks as global ranks K*N .. K*N + N - 1
  of M*N. They meet at ``--master-addr:--master-port``, where global rank 0 (on node 0)
  serves the store, so the port is required when M > 1 and node 0's address must be
  reachable from every machine. A launcher watches only its own ranks: a rank that fails
  on another machine reaches this one as a failed collective (a closed connection, or
  ``HCCL_EXEC_TIMEOUT``), and its ranks then exit by themselves.
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

from openacl.cli import exit_status, program_command
from openacl.hccl.comm import free_port

POLL_INTERVAL_S = 0.05  # how often the children are polled, seconds
KILL_GRACE_S = 5.0  # time a terminated rank gets before SIGKILL, seconds
TIMEOUT_STATUS = 124  # exit status when --timeout expires (timeout(1)'s)
INTERRUPT_STATUS = 130  # exit status on Ctrl-C (128 + SIGINT)
DEFAULT_MASTER_ADDR = "127.0.0.1"
MAX_RANKS = 256  # most local ranks one launch starts
MAX_PORT = 65535
USAGE_STATUS = 2  # exit status of a refused command line (argparse's)

_print_lock = threading.Lock()


def rank_environment(local_rank: int, nproc: int, master_addr: str, master_port: int,
                     base: dict[str, str] | None = None, nnodes: int = 1,
                     node_rank: int = 0) -> dict[str, str]:
    """The environment of local rank ``local_rank`` of ``nproc`` on node ``node_rank`` of
    ``nnodes`` (torchrun's variables; see the design note)."""
    env = dict(os.environ if base is None else base)
    env.update({"RANK": str(node_rank * nproc + local_rank), "LOCAL_RANK": str(local_rank),
                "WORLD_SIZE": str(nnodes * nproc), "LOCAL_WORLD_SIZE": str(nproc),
                "GROUP_RANK": str(node_rank), "MASTER_ADDR": master_addr,
                "MASTER_PORT": str(master_port), "PYTHONUNBUFFERED": "1"})
    return env


def _forward(stream: IO[bytes], prefix: str, out: IO[str]) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip("\n")
        with _print_lock:
            out.write(f"{prefix}{line}\n")
            out.flush()
    stream.close()


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


def launch(nproc: int, command: Sequence[str], master_addr: str = DEFAULT_MASTER_ADDR,
           master_port: int | None = None, timeout_s: float | None = None,
           stdout: IO[str] | None = None, stderr: IO[str] | None = None, nnodes: int = 1,
           node_rank: int = 0) -> int:
    """Run ``command`` as the ``nproc`` local ranks of node ``node_rank`` of ``nnodes``;
    returns the exit status (design note). ``master_port`` None: a free one (one node)."""
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    if master_port is None and nnodes > 1:
        raise ValueError("a launch over several nodes needs the master port of node 0")
    port = free_port(master_addr) if master_port is None else master_port
    children: list[subprocess.Popen] = []
    forwarders: list[threading.Thread] = []
    status = 0
    try:
        for local_rank in range(nproc):
            rank = node_rank * nproc + local_rank
            env = rank_environment(local_rank, nproc, master_addr, port, nnodes=nnodes,
                                   node_rank=node_rank)
            child = subprocess.Popen(list(command), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True, env=env)
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
                status = exit_status(failed[0])
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


def _refusal(args: argparse.Namespace) -> str | None:
    """Why the command line cannot run, naming the flag; None when it can."""
    if not 1 <= args.nproc <= MAX_RANKS:
        return f"-n {args.nproc} is invalid: expected 1 .. {MAX_RANKS} ranks"
    if args.nnodes < 1:
        return f"--nnodes {args.nnodes} is invalid: expected 1 or more machines"
    if not 0 <= args.node_rank < args.nnodes:
        return (f"--node-rank {args.node_rank} is invalid: expected 0 .. {args.nnodes - 1} "
                f"(--nnodes {args.nnodes})")
    if args.master_port is None and args.nnodes > 1:
        return (f"--master-port is required with --nnodes {args.nnodes}: every node's "
                f"launcher must name the same port on node 0 (--master-addr)")
    if args.master_port is not None and not 1 <= args.master_port <= MAX_PORT:
        return f"--master-port {args.master_port} is invalid: expected 1 .. {MAX_PORT}"
    if args.timeout is not None and args.timeout <= 0:
        return f"--timeout {args.timeout:g} is invalid: expected seconds > 0"
    return None


def _cmd_launch(args: argparse.Namespace) -> int:
    refusal = _refusal(args)
    if refusal is not None:
        print(f"openacl launch: {refusal}", file=sys.stderr)
        return USAGE_STATUS
    try:
        return launch(args.nproc, program_command([args.program, *args.args]), args.master_addr,
                      args.master_port, args.timeout, nnodes=args.nnodes,
                      node_rank=args.node_rank)
    except OSError as exc:
        print(f"openacl launch: cannot start {args.program!r}: {exc}", file=sys.stderr)
        return USAGE_STATUS


def register(commands: Any) -> None:
    """Add the ``launch`` subcommand to the ``openacl`` parser."""
    parser = commands.add_parser(
        "launch", help="run N local ranks of a program (RANK, WORLD_SIZE, MASTER_* set)",
        description="Start N local ranks of a program with torchrun's variables (RANK, "
                    "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), forward their output "
                    "prefixed by rank, and exit with the first non-zero status (the other "
                    "ranks are then stopped). Over M machines, run one launcher on each with "
                    "--nnodes M, its own --node-rank and node 0's --master-addr/--master-port.")
    parser.add_argument("-n", "--nproc", type=int, required=True, metavar="N",
                        help="number of ranks on this machine")
    parser.add_argument("--nnodes", type=int, default=1, metavar="M",
                        help="number of machines, one launcher each (default 1)")
    parser.add_argument("--node-rank", type=int, default=0, metavar="K",
                        help="this machine's index, 0 .. M-1: its ranks are K*N .. K*N+N-1 "
                             "(default 0)")
    parser.add_argument("--master-addr", default=DEFAULT_MASTER_ADDR,
                        help=f"rendezvous address: node 0's (default {DEFAULT_MASTER_ADDR})")
    parser.add_argument("--master-port", type=int, default=None,
                        help="rendezvous port on node 0 (default: a free one; required "
                             "with --nnodes > 1)")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help=f"kill every rank after this long (exit status {TIMEOUT_STATUS})")
    parser.add_argument("program", help="app.py (run with this Python) or a command")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the program's arguments")
    parser.set_defaults(handler=_cmd_launch)


__all__ = ["launch", "rank_environment", "register"]
