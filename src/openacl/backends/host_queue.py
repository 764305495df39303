"""Host execution queues: how the CPU backend runs stream work.

Design note (invariants)
------------------------
* A ``Timeline`` is a monotonically increasing counter. ``signal(v)`` raises it to ``v``
  (never lowers it); ``wait(v)`` blocks until it is ``>= v``. These are the only two
  synchronisation primitives: events, stream-waits-event and synchronize are built from
  them in ``openacl.runtime`` (STYLE.md rule 7).
* A ``HostQueue`` hands out increasing values at submission (``submit`` returns the value
  of the task) and signals its timeline with that value once the task has run, or has been
  skipped. Values are therefore signalled in submission order, and "task ``v`` is done"
  is exactly ``timeline.value >= v``.
* Tasks receive their own value. What a failing task means (skip the rest, report at
  synchronize) is the runtime's policy (``openacl.runtime.stream``); here a task's value is
  signalled whether it returns or raises, so nobody waiting on the queue ever hangs, and a
  worker survives anything a task throws.
* Executors decide *where* a task runs: ``threaded`` gives each queue its own worker thread
  (FIFO per queue, queues run concurrently); ``inline`` runs the task on the submitting
  thread before ``submit`` returns; ``deterministic`` runs every queue's tasks on one worker
  in host submission order, which is always a legal schedule because a task can only wait
  on values submitted before it.
* A thread that waits for a threaded queue's value with no time limit (a synchronize) first
  runs, itself, the queued tasks up to that value that the worker has not started
  (``HostQueue.help``): a launch followed by a synchronize then costs no thread hand-off.
  Each worker has a run lock, held while a task is taken from its FIFO and run, by the
  worker or by a helper, so tasks still run one at a time in value order; a helper takes it
  only if it is free (a task already running is waited for as before). Tasks run in the
  executor's task context whoever runs them: a worker enters it for its whole life, a helper
  around what it takes (the backends' quiet floating point).
* Locks: a queue's ``_lock`` (re-entrant) makes "take the next value, hand the task to the
  executor" atomic, so executors see tasks in value order. Only the inline executor runs a
  task under it: that serialises an inline stream (its meaning) and lets a task submit to
  its own stream. A timeline's condition guards only its value and is never held while a
  task runs or while another lock is taken.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager

from openacl import log

Task = Callable[[int], None]  # called with the task's own value on the timeline

STREAM_MODES = ("threaded", "inline", "deterministic")


class Timeline:
    """A monotonically increasing counter with blocking waits."""

    __slots__ = ("_value", "_cond", "_waiters")

    def __init__(self) -> None:
        self._value = 0
        self._cond = threading.Condition(threading.Lock())
        self._waiters = 0  # threads blocked in wait(); signal notifies only when > 0

    @property
    def value(self) -> int:
        return self._value

    def signal(self, value: int) -> None:
        with self._cond:
            if value > self._value:
                self._value = value
                if self._waiters:
                    self._cond.notify_all()

    def wait(self, value: int, timeout: float | None = None) -> bool:
        """Block until the counter reaches ``value``; False if ``timeout`` seconds pass."""
        if self._value >= value:
            return True
        with self._cond:
            self._waiters += 1
            try:
                return self._cond.wait_for(lambda: self._value >= value, timeout)
            finally:
                self._waiters -= 1


class HostQueue:
    """An in-order queue of host tasks with a timeline (the CPU "stream hardware")."""

    def __init__(self, executor: Executor, name: str) -> None:
        self.name = name
        self.timeline = Timeline()
        self._executor = executor
        self._push = executor.submit
        self._lock = threading.RLock()
        self._submitted = 0
        self._closed = False
        executor.attach(self)

    @property
    def submitted(self) -> int:
        """Value of the newest submitted task (0 when nothing was ever submitted)."""
        return self._submitted

    def submit(self, task: Task, host: bool = False) -> int:
        """Enqueue ``task``; returns its value on this queue's timeline. ``host`` marks work
        that reads results on the host (callbacks); here every task is host work."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"queue {self.name} is closed")
            self._submitted += 1
            value = self._submitted
            # Submitting under the queue lock keeps the executor's order equal to value order.
            self._push(self, value, task)
        return value

    def run(self, value: int, task: Task) -> None:
        """Run one task and signal its value, whatever happens. Executor-only."""
        try:
            task(value)
        except BaseException:  # noqa: BLE001 - the owner's guard should have caught it
            log.logger().exception("unguarded task failed on %s", self.name)
        finally:
            self.timeline.signal(value)

    def help(self, value: int) -> None:
        """Run, on the calling thread, the queued tasks up to ``value`` that no worker has
        started (see the design note); the caller then waits for ``value`` as usual."""
        if self.timeline.value < value:
            self._executor.help(self, value)

    def done(self, value: int | None = None) -> bool:
        """Whether task ``value`` (default: everything submitted so far) has run."""
        return self.timeline.value >= (self._submitted if value is None else value)

    def stamp(self) -> float:
        """A time-stamp of "now" on this queue, taken from inside a task (events)."""
        return time.perf_counter()

    def elapsed_ms(self, start: float, end: float) -> float:
        """Milliseconds between two ``stamp`` results."""
        return (end - start) * 1000.0

    def close(self) -> None:
        """Refuse new tasks; queued ones still run. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._executor.detach(self)


class Executor:
    """Where queued tasks run. Subclasses: threaded, inline, deterministic."""

    def attach(self, queue: HostQueue) -> None:
        pass

    def detach(self, queue: HostQueue) -> None:
        pass

    def submit(self, queue: HostQueue, value: int, task: Task) -> None:
        raise NotImplementedError

    def help(self, queue: HostQueue, value: int) -> None:
        """Run ``queue``'s tasks up to ``value`` on the calling thread where this executor
        allows it (threaded); others leave them to their workers."""

    def shutdown(self, timeout: float | None = None) -> None:
        pass


class InlineExecutor(Executor):
    """Runs each task on the submitting thread before ``submit`` returns (debugging)."""

    def submit(self, queue: HostQueue, value: int, task: Task) -> None:
        queue.run(value, task)


class _Worker:
    """One thread draining a FIFO of (queue, value, task) items; ``None`` ends it. A task is
    taken and run under ``_running``, by the worker or by a helping thread (``help``)."""

    def __init__(self, name: str,
                 context: Callable[[], ContextManager] = contextlib.nullcontext) -> None:
        self._items: collections.deque = collections.deque()
        self._ready = threading.Condition(threading.Lock())  # guards _items
        self._running = threading.Lock()  # held while one task is taken and run
        self._context = context  # what every task runs in
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def push(self, owner: HostQueue, value: int, task: Task) -> None:
        with self._ready:
            self._items.append((owner, value, task))
            self._ready.notify()

    def stop(self) -> None:
        """Finish what is queued, then exit."""
        with self._ready:
            self._items.append(None)
            self._ready.notify()

    def _take(self) -> tuple | None:
        with self._ready:
            return self._items.popleft() if self._items and self._items[0] is not None \
                else None

    def _loop(self) -> None:
        with self._context():
            self._drain()

    def _drain(self) -> None:
        items, ready = self._items, self._ready
        while True:
            with ready:
                while not items:
                    ready.wait()
                if items[0] is None:
                    return
            with self._running:
                item = self._take()  # None: a helper ran it meanwhile
                if item is not None:
                    owner, value, task = item
                    owner.run(value, task)

    def help(self, owner: HostQueue, value: int) -> None:
        """Run queued tasks on this thread until ``owner`` reaches ``value``, unless the
        worker is running one (then it finishes them)."""
        if not self._running.acquire(blocking=False):
            return
        try:
            with self._context():
                while owner.timeline.value < value:
                    item = self._take()
                    if item is None:
                        return
                    item_owner, item_value, task = item
                    item_owner.run(item_value, task)
        finally:
            self._running.release()


class ThreadedExecutor(Executor):
    """Each queue gets its own worker thread: queues run concurrently, each in FIFO order."""

    def __init__(self, task_context: Callable[[], ContextManager] = contextlib.nullcontext
                 ) -> None:
        self._workers: dict[int, _Worker] = {}
        self._lock = threading.Lock()
        self._task_context = task_context

    def attach(self, queue: HostQueue) -> None:
        with self._lock:
            self._workers[id(queue)] = _Worker(f"openacl-{queue.name}", self._task_context)

    def detach(self, queue: HostQueue) -> None:
        with self._lock:
            worker = self._workers.pop(id(queue), None)
        if worker is not None:
            worker.stop()

    def submit(self, queue: HostQueue, value: int, task: Task) -> None:
        self._workers[id(queue)].push(queue, value, task)

    def help(self, queue: HostQueue, value: int) -> None:
        worker = self._workers.get(id(queue))
        if worker is not None:
            worker.help(queue, value)

    def shutdown(self, timeout: float | None = None) -> None:
        with self._lock:
            workers = list(self._workers.values())
            self._workers.clear()
        for worker in workers:
            worker.stop()
        for worker in workers:
            if worker.thread is not threading.current_thread():
                worker.thread.join(timeout)


class DeterministicExecutor(Executor):
    """One worker runs every queue's tasks in host submission order."""

    def __init__(self, task_context: Callable[[], ContextManager] = contextlib.nullcontext
                 ) -> None:
        self._worker = _Worker("openacl-deterministic", task_context)

    def submit(self, queue: HostQueue, value: int, task: Task) -> None:
        self._worker.push(queue, value, task)

    def shutdown(self, timeout: float | None = None) -> None:
        self._worker.stop()
        if self._worker.thread is not threading.current_thread():
            self._worker.thread.join(timeout)


def make_executor(mode: str,
                  task_context: Callable[[], ContextManager] = contextlib.nullcontext
                  ) -> Executor:
    """The executor for a stream mode (see ``STREAM_MODES``); its tasks run inside
    ``task_context()`` (a worker's whole life, a waiting thread's borrowed tasks; the inline
    mode keeps the caller's state)."""
    if mode == "threaded":
        return ThreadedExecutor(task_context)
    if mode == "inline":
        return InlineExecutor()
    if mode == "deterministic":
        return DeterministicExecutor(task_context)
    raise ValueError(f"unknown stream mode {mode!r}; expected one of {STREAM_MODES}")
