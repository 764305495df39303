"""Runtime configuration: ``init``'s JSON file or dict, overridden by ``OPENACL_*`` variables.

Keys (all optional)::

    {"backend": "cpu", "device_count": 1, "stream_mode": "threaded",
     "memory_limit": "4GiB", "log_level": "warning", "num_threads": 2}

``num_threads``: the CPU threads openacl's work uses (``runtime/threads.py``; default: the
cores this process may run on).

``profile``: a directory; ``init`` starts the profiler (``runtime/profiler.py``) and
``finalize`` writes its records there. ``OPENACL_PROFILE=<dir>`` sets it from the
environment (``openacl profile -- python app.py`` does). CANN's ``profiler`` section turns it
on too: ``{"profiler": {"switch": "on", "output": "out"}}`` profiles into
``out/PROF_<YYYYmmddHHMMSS>_<pid>`` (``output`` defaults to the current directory). Its
other keys are accepted; those that select hardware counters (``aicpu``, ``aic_metrics``,
``l2``...) are ignored with one warning naming them.

``sanitize``: the sanitizer's tools (``runtime/sanitizer.py``), e.g. ``"racecheck"`` or
``"memcheck,leak-check"``; ``OPENACL_SANITIZE`` sets it from the environment (``openacl
sanitize -- python app.py`` does).

A CANN ``acl.json`` may hold other sections (``dump``, ``err_msg_mode``...); they are
accepted and ignored, as a user moving a config over would expect.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from openacl import log
from openacl.backends import BACKEND_NAMES
from openacl.backends.host_queue import STREAM_MODES
from openacl.errors import (
    ACL_ERROR_FILE_ATTR_INVALID,
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_PARSE_FILE,
    AclError,
)
from openacl.log import LEVELS

ENV_PREFIX = "OPENACL_"
LOG_LEVELS = tuple(LEVELS)  # "null": silent
MAX_DEVICE_COUNT = 64  # CPU devices one process may simulate
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20,
          "mb": 1000 ** 2, "mib": 1 << 20, "g": 1 << 30, "gb": 1000 ** 3, "gib": 1 << 30,
          "t": 1 << 40, "tb": 1000 ** 4, "tib": 1 << 40}
PROFILER_SECTION = "profiler"  # CANN's acl.json section
# acl.json profiler keys: honoured; whose data is always collected; hardware counters that a
# CPU has no equivalent of (accepted, ignored with a warning naming them)
PROFILER_HONOURED = ("switch", "output")
PROFILER_ALWAYS = ("ascendcl", "runtime_api", "task_time", "task_trace", "training_trace",
                   "storage_limit", "msproftx", "ge_api", "task_memory")
PROFILER_HARDWARE = ("aicpu", "aic_metrics", "l2", "hccl", "instr_profiling_freq",
                     "sys_hardware_mem_freq", "llc_profiling", "sys_io_sampling_freq",
                     "sys_interconnection_freq", "dvpp_freq", "host_sys", "host_sys_usage",
                     "host_sys_usage_freq", "sys_cpu_freq", "aiv_metrics")


@dataclass(frozen=True)
class RuntimeConfig:
    """Validated runtime settings."""

    backend: str = "cpu"
    device_count: int = 1
    stream_mode: str = "threaded"
    memory_limit: int | None = None  # bytes per device; None: the hardware's memory
    log_level: str = "warning"
    num_threads: int | None = None  # CPU threads (runtime/threads.py); None: the cores
    profile: str | None = None  # directory the profiler writes to (profiler.py); None: off
    sanitize: str | None = None  # sanitizer tools, "memcheck,leak-check" (sanitizer.py)


def parse_bytes(value: Any) -> int:
    """``4096``, ``"512MiB"``, ``"2 GB"`` -> bytes; raises ``ValueError``."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a byte count")
    if isinstance(value, int):
        amount = value
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(value))
        if match is None or match.group(2).lower() not in _UNITS:
            raise ValueError(f"{value!r} is not a byte count like 4096 or '512MiB'")
        amount = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if amount <= 0:
        raise ValueError(f"{value!r} must be positive")
    return amount


def _coerce(key: str, value: Any) -> Any:
    """Check one setting; raises ``ValueError`` with the reason."""
    if key == "backend":
        if value not in BACKEND_NAMES:
            raise ValueError(f"expected one of {BACKEND_NAMES}")
        return value
    if key == "device_count":
        count = int(value)
        if isinstance(value, bool) or str(count) != str(value).strip() or not (
                1 <= count <= MAX_DEVICE_COUNT):
            raise ValueError(f"expected an integer in [1, {MAX_DEVICE_COUNT}]")
        return count
    if key == "stream_mode":
        if value not in STREAM_MODES:
            raise ValueError(f"expected one of {STREAM_MODES}")
        return value
    if key == "memory_limit":
        return None if value in (None, "", "none") else parse_bytes(value)
    if key == "num_threads":
        from openacl.runtime.threads import MAX_THREADS

        count = int(value)
        if isinstance(value, bool) or str(count) != str(value).strip() or not (
                1 <= count <= MAX_THREADS):
            raise ValueError(f"expected an integer in [1, {MAX_THREADS}]")
        return count
    if key == "profile":
        if value in (None, ""):
            return None
        if not isinstance(value, (str, os.PathLike)):
            raise ValueError("expected a directory path")
        return os.fspath(value)
    if key == "sanitize":
        if value in (None, "", "none", "off"):
            return None
        from openacl.runtime.sanitizer import parse_spec, spec_string

        return spec_string(parse_spec(value))
    if key == "log_level":
        level = str(value).lower()
        if level not in LOG_LEVELS:
            raise ValueError(f"expected one of {LOG_LEVELS}")
        return level
    raise KeyError(key)


def _apply(config: RuntimeConfig, settings: Mapping[str, Any], source: str, code: int
           ) -> RuntimeConfig:
    known = {f.name for f in fields(RuntimeConfig)}
    changes = {}
    for key, value in settings.items():
        if key not in known:
            continue
        try:
            changes[key] = _coerce(key, value)
        except (ValueError, TypeError) as exc:
            raise AclError(code, f"{source}: '{key}' = {value!r} is invalid: {exc}") from None
    return replace(config, **changes)


def _profiler_section(config: RuntimeConfig, section: Any, source: str, code: int
                      ) -> RuntimeConfig:
    """Apply CANN's ``profiler`` section (see the module docstring)."""
    if section is None:
        return config
    if not isinstance(section, Mapping):
        raise AclError(code, f"{source}: '{PROFILER_SECTION}' = {section!r} is invalid: "
                             f"expected an object like {{\"switch\": \"on\"}}")
    switch = section.get("switch", "off")
    if switch not in ("on", "off"):
        raise AclError(code, f"{source}: '{PROFILER_SECTION}.switch' = {switch!r} is invalid: "
                             f"expected \"on\" or \"off\"")
    if switch != "on":
        return config
    output = section.get("output", "") or "."
    if not isinstance(output, str):
        raise AclError(code, f"{source}: '{PROFILER_SECTION}.output' = {output!r} is invalid: "
                             f"expected a directory path")
    ignored = [key for key in section if key in PROFILER_HARDWARE]
    unknown = [key for key in section if key not in PROFILER_HONOURED + PROFILER_ALWAYS
               + PROFILER_HARDWARE]
    if ignored or unknown:
        parts = []
        if ignored:
            parts.append(f"{', '.join(ignored)} (hardware counters; a CPU has none)")
        if unknown:
            parts.append(f"{', '.join(unknown)} (not CANN profiler keys)")
        log.logger().warning("%s: profiler keys ignored: %s", source, "; ".join(parts))
    run = f"PROF_{time.strftime('%Y%m%d%H%M%S')}_{os.getpid()}"
    return replace(config, profile=os.path.join(output, run))


def load_config(config: str | os.PathLike | Mapping[str, Any] | None = None,
                environ: Mapping[str, str] | None = None) -> RuntimeConfig:
    """Build the runtime config from ``config`` (path, dict or None) and the environment."""
    result = RuntimeConfig()
    if isinstance(config, Mapping):
        result = _apply(result, config, "init config", ACL_ERROR_INVALID_PARAM)
        result = _profiler_section(result, config.get(PROFILER_SECTION), "init config",
                                   ACL_ERROR_INVALID_PARAM)
    elif config not in (None, ""):
        if not isinstance(config, (str, os.PathLike)):
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'configPath' = {config!r} is invalid: expected a JSON "
                           f"file path, a dict, or None")
        path = os.fspath(config)
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise AclError(ACL_ERROR_INVALID_FILE,
                           f"argument 'configPath' = '{path}' cannot be read: {exc}") from None
        if text.strip():
            try:
                settings = json.loads(text)
            except json.JSONDecodeError as exc:
                raise AclError(ACL_ERROR_PARSE_FILE,
                               f"argument 'configPath' = '{path}' is not valid JSON: {exc}"
                               ) from None
            if not isinstance(settings, dict):
                raise AclError(ACL_ERROR_PARSE_FILE,
                               f"argument 'configPath' = '{path}' must hold a JSON object")
            result = _apply(result, settings, f"config file '{path}'",
                            ACL_ERROR_FILE_ATTR_INVALID)
            result = _profiler_section(result, settings.get(PROFILER_SECTION),
                                       f"config file '{path}'", ACL_ERROR_FILE_ATTR_INVALID)
    environ = os.environ if environ is None else environ
    overrides = {f.name: environ[ENV_PREFIX + f.name.upper()] for f in fields(RuntimeConfig)
                 if ENV_PREFIX + f.name.upper() in environ}
    return _apply(result, overrides, "environment", ACL_ERROR_INVALID_PARAM)
