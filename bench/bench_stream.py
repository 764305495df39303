"""Stream overheads per mode: the enqueue cost of an empty task and the enqueue+sync round trip.

Every aclnn call, memcpy_async and host function ends in a stream enqueue, and every
synchronous API a user calls after it ends in a synchronize, so these two fixed costs bound
how small a kernel may be before the runtime, not the work, sets the speed. They are set
against a bare ``np.add(a, b, out=c)`` on one-element arrays: the cost of the smallest
numpy call, which is what the same step costs a user who calls numpy directly.

(a) enqueue: ``rt.launch_host_func(stream, noop)`` ``ENQUEUE_TASKS`` times, timed without the
    synchronize that follows (in ``threaded`` mode the worker drains concurrently and
    shares the GIL, which the figure includes, as a real program would see it).
(b) round trip: one launch + ``rt.synchronize_stream``, timed each, median of
    ``ROUND_TRIPS``. In ``threaded`` and ``deterministic`` modes this needs two thread
    wake-ups, so a bare CPython two-thread lock handoff is printed as the floor. Both move
    with the OS's thread placement: a wake-up on the same CPU is a few µs, one across
    (virtual) CPUs can cost tens of µs. ``taskset -c 0`` pins the process to one CPU and
    shows the runtime's own overhead alone.

Run: ``.venv/bin/python bench/bench_stream.py [--json PATH]``.
"""

from __future__ import annotations

import threading

import numpy as np
from _common import (
    US_PER_S,
    acl_runtime,
    median,
    parse_args,
    print_table,
    ratio,
    time_batch,
    time_median,
    write_json,
)

from openacl import rt

MODES = ("threaded", "inline", "deterministic")
ENQUEUE_TASKS = 20_000  # empty tasks per timed enqueue batch
ENQUEUE_REPEATS = 5  # timed enqueue batches (median)
ROUND_TRIPS = 2_000  # timed enqueue+synchronize round trips (median)
WARMUP_CALLS = 200  # untimed calls before each measurement
PEER_CALLS = 1_000  # np.add calls per timed batch (one call is too short to time alone)
PEER_REPEATS = 21  # timed np.add batches (median)


def noop() -> None:
    """The empty task."""


def enqueue_seconds(stream: int) -> float:
    """Seconds per ``launch_host_func`` of an empty task, enqueue only (median of batches)."""
    def launch() -> None:
        rt.launch_host_func(stream, noop)

    time_batch(launch, WARMUP_CALLS)
    rt.synchronize_stream(stream)
    samples = []
    for _ in range(ENQUEUE_REPEATS):
        samples.append(time_batch(launch, ENQUEUE_TASKS))
        rt.synchronize_stream(stream)
    return median(samples)


def round_trip_seconds(stream: int) -> float:
    """Seconds per launch + synchronize of one empty task (median of single round trips)."""
    def round_trip() -> None:
        rt.launch_host_func(stream, noop)
        rt.synchronize_stream(stream)

    return time_median(round_trip, ROUND_TRIPS, WARMUP_CALLS)


def np_add_seconds() -> float:
    """Seconds per ``np.add(a, b, out=c)`` on one-element float32 arrays."""
    a, b, c = (np.ones(1, np.float32) for _ in range(3))

    def add() -> None:
        np.add(a, b, out=c)

    return time_median(add, PEER_REPEATS, calls=PEER_CALLS)


def thread_handoff_seconds() -> float:
    """Seconds per bare CPython round trip to a waiting thread and back (two lock handoffs),
    the floor under a threaded synchronize. Timed on its own: interleaved with the round
    trips it slowed the inline ones from about 4 to 7 us on the 2-CPU test machine."""
    request, reply = threading.Lock(), threading.Lock()
    request.acquire()
    reply.acquire()
    stopping = threading.Event()

    def worker() -> None:
        while not stopping.is_set():
            request.acquire()
            reply.release()

    def handoff() -> None:
        request.release()
        reply.acquire()

    thread = threading.Thread(target=worker, name="bench-handoff", daemon=True)
    thread.start()
    try:
        return time_median(handoff, ROUND_TRIPS, WARMUP_CALLS)
    finally:
        stopping.set()
        handoff()
        thread.join()


def measure_mode(mode: str) -> dict[str, float]:
    with acl_runtime(stream_mode=mode):
        stream = rt.create_stream()
        peer = np_add_seconds()
        enqueue = enqueue_seconds(stream)
        round_trip = round_trip_seconds(stream)
        rt.destroy_stream(stream)
    return {"enqueue_us": enqueue * US_PER_S, "round_trip_us": round_trip * US_PER_S,
            "np_add_us": peer * US_PER_S,
            "enqueue_ratio": ratio(enqueue, peer), "round_trip_ratio": ratio(round_trip, peer)}


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    results = {mode: measure_mode(mode) for mode in MODES}
    handoff_us = thread_handoff_seconds() * US_PER_S
    rows = [(mode, r["enqueue_us"], r["enqueue_ratio"], r["round_trip_us"],
             r["round_trip_ratio"], r["np_add_us"]) for mode, r in results.items()]
    print_table(f"stream overheads per mode, ratio = ours / np.add time (enqueue: median of "
                f"{ENQUEUE_REPEATS} x {ENQUEUE_TASKS} tasks; round trip: median of {ROUND_TRIPS})",
                ("mode", "enqueue us", "enq/np.add", "round trip us", "rt/np.add", "np.add us"),
                rows)
    print(f"reference: a bare CPython two-thread lock handoff round trip takes {handoff_us:.1f} us "
          f"here\n(the floor under a threaded or deterministic round trip; it depends on whether "
          f"the OS\nschedules the two threads on one CPU or two)")
    write_json(args.json, "bench_stream", results, thread_handoff_us=handoff_us)


if __name__ == "__main__":
    main()
