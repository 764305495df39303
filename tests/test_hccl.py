"""openacl.hccl: collectives on streams over torch.distributed (gloo), the compat face
``openacl.compat.hccl``, and ``openacl launch``.

Multi-process tests start real ranks on loopback with ``openacl launch`` (free ports, a
bounded ``--timeout`` and a subprocess timeout on top); each rank checks its results against
numpy (tests/hccl_worker.py). Argument checks run in this process over a one-rank
communicator, which needs no peer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import fake_cupy
import openacl
from openacl import hccl, rt
from openacl.compat import acl
from openacl.compat import hccl as chccl
from openacl.errors import get_recent_err_msg
from openacl.hccl import collectives

pytest.importorskip("torch.distributed")

TESTS = Path(__file__).resolve().parent
WORKER = TESTS / "hccl_worker.py"
LAUNCH_TIMEOUT_S = 60  # --timeout of one launch: every rank killed past it
RUN_TIMEOUT_S = LAUNCH_TIMEOUT_S + 15  # the subprocess bound on top (the launcher's own stop)
STALL_TIMEOUT_S = 2  # HCCL_EXEC_TIMEOUT of the stalled-peer test, seconds
COUNT = 16


def launch(n: int, *args: str, timeout: float = LAUNCH_TIMEOUT_S, env: dict | None = None
           ) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "openacl.cli.main", "launch", "-n", str(n),
               "--timeout", str(timeout), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          env={**os.environ, **(env or {})})


def run_scenario(n: int, scenario: str, folder: Path, env: dict | None = None,
                 passing: int | None = None) -> str:
    """Run ``scenario`` on ``n`` ranks; ranks 0 .. passing-1 (all by default) must pass."""
    result = launch(n, str(WORKER), scenario, str(folder), env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for rank in range(n if passing is None else passing):
        assert f"[rank {rank}] PASS {scenario}" in result.stdout, output
    return output


# -- multi-process -------------------------------------------------------------------------------
@pytest.mark.parametrize("ranks", [2, 3])
def test_every_collective_and_type_against_numpy(ranks, tmp_path):
    """all_reduce of every reducible type and op, in place too; broadcast, all_gather,
    reduce_scatter, reduce from every root, send/recv on two streams, all_to_all_v with
    gaps, barrier; two communicators at once; stream ordering; the compat face."""
    run_scenario(ranks, "collectives", tmp_path)


def test_four_ranks(tmp_path):
    run_scenario(4, "quick", tmp_path)


def test_a_rank_exiting_fails_the_others_collective_fast(tmp_path):
    output = run_scenario(2, "peer_exits", tmp_path, passing=1)  # rank 1 leaves early
    assert "dead peer detected" in output


def test_a_stalled_peer_times_out_after_hccl_exec_timeout(tmp_path):
    run_scenario(2, "stalled_peer", tmp_path, env={"HCCL_EXEC_TIMEOUT": str(STALL_TIMEOUT_S)})


def test_comm_init_cluster_info_from_a_rank_table(tmp_path):
    table = {"version": "1.0", "status": "completed", "server_count": "1", "server_list": [
        {"server_id": "127.0.0.1", "device": [
            {"device_id": str(rank), "device_ip": f"192.168.1.{rank}", "rank_id": str(rank)}
            for rank in range(2)]}]}
    path = tmp_path / "rank_table.json"
    path.write_text(json.dumps(table))
    run_scenario(2, "cluster", tmp_path, env={"RANK_TABLE_FILE": str(path),
                                              "HCCL_IF_BASE_PORT": str(hccl.free_port())})


# -- one process ----------------------------------------------------------------------------------
@pytest.fixture(params=["threaded", "inline", "deterministic"])
def comm(request):
    """A one-rank communicator on device 0 of a two-device CPU runtime, in every stream mode."""
    openacl.init({"stream_mode": request.param, "device_count": 2})
    rt.set_device(0)
    communicator = hccl.comm_init_root_info(1, hccl.get_root_info(), 0, exec_timeout=10)
    yield communicator
    if not communicator.destroyed:
        communicator.destroy()


def _device(values: np.ndarray) -> openacl.DeviceBuffer:
    buffer = openacl.DeviceBuffer(values.nbytes)
    buffer.copy_from(values.view(np.uint8))
    return buffer


def test_one_rank_collectives_in_every_stream_mode(comm):
    values = np.arange(COUNT, dtype=np.float32)
    src, dst = _device(values), openacl.DeviceBuffer(values.nbytes)
    with openacl.Stream() as stream:
        hccl.all_reduce(src, dst, COUNT, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM, comm,
                        stream)
        hccl.broadcast(dst, COUNT, hccl.HCCL_DATA_TYPE_FP32, 0, comm, stream)
        hccl.barrier(comm, stream)
        event = stream.record()
        event.synchronize()
    np.testing.assert_array_equal(dst.to_numpy(np.float32), values)
    assert (comm.rank, comm.size, hccl.get_rank_size(comm), hccl.get_rank_id(comm)) == \
        (0, 1, 1, 0)
    with comm:
        pass
    assert comm.destroyed


def test_cached_views_follow_freed_and_reused_memory(comm):
    """all_reduce keeps torch views of receive buffers (collectives.py): a freed buffer's
    view is never reused for memory allocated again at the same address, and the cache
    stays bounded."""
    stream = openacl.Stream()
    addresses = set()
    for round_ in range(collectives.TENSOR_CACHE_ENTRIES + 4):
        values = np.full(COUNT, round_, np.float32)
        buffer = _device(values)
        addresses.add(buffer.ptr)
        for send in (buffer, _device(values + 1)):  # in place, then out of place
            hccl.all_reduce(send, buffer, COUNT, hccl.HCCL_DATA_TYPE_FP32,
                            hccl.HCCL_REDUCE_SUM, comm, stream)
            stream.synchronize()
            np.testing.assert_array_equal(buffer.to_numpy(np.float32),
                                          send.to_numpy(np.float32))
            if send is not buffer:
                send.free()
        buffer.free()
        assert len(comm.tensors) <= collectives.TENSOR_CACHE_ENTRIES
        # only the buffer just freed may still be held: the next miss drops it
        assert sum(not region.live for region, _ in comm.tensors.values()) <= 1
    assert len(addresses) < collectives.TENSOR_CACHE_ENTRIES  # memory was reused
    stream.destroy()
    comm.destroy()
    assert not comm.tensors


def test_a_zero_count_enqueues_nothing(comm):
    stream = openacl.Stream()
    hccl.all_reduce(0x1234, 0x1234, 0, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM, comm,
                    stream)  # not even the pointers are looked at
    assert stream.done()
    stream.destroy()


def _raises(code: int, *words: str):
    class Check:
        def __enter__(self):
            self.context = pytest.raises(hccl.HcclError)
            self.info = self.context.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.context.__exit__(*exc)
            error = self.info.value
            assert error.code == code, error
            assert isinstance(error, openacl.AclError)
            assert str(error).startswith(f"{hccl.hccl_result_name(code)} ({code}): "), error
            for word in words:
                assert word in str(error), error
            return handled
    return Check()


@pytest.mark.parametrize("comm", ["threaded"], indirect=True)
def test_bad_arguments_have_hccl_codes(comm):
    fp32, total = hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM
    buffer = openacl.DeviceBuffer(COUNT * 4)
    host = openacl.HostBuffer(COUNT * 4)
    small = openacl.DeviceBuffer(8)
    with _raises(hccl.HCCL_E_PARA, "'sendBuf'", "past the end"):
        hccl.all_reduce(buffer, buffer, COUNT + 1, fp32, total, comm)
    with _raises(hccl.HCCL_E_PARA, "'recvBuf'", "past the end"):
        hccl.all_gather(buffer, small, COUNT, fp32, comm)
    with _raises(hccl.HCCL_E_PARA, "'root' = 1", "0 .. 0"):
        hccl.broadcast(buffer, COUNT, fp32, 1, comm)
    with _raises(hccl.HCCL_E_PARA, "'root' = -1"):
        hccl.reduce(buffer, buffer, COUNT, fp32, total, -1, comm)
    with _raises(hccl.HCCL_E_PARA, "'dataType' = 13", "HCCL_DATA_TYPE_BFP16=11"):
        hccl.all_reduce(buffer, buffer, COUNT, 13, total, comm)
    with _raises(hccl.HCCL_E_PARA, "'op' = 4", "HCCL_REDUCE_MIN=3"):
        hccl.all_reduce(buffer, buffer, COUNT, fp32, 4, comm)
    with _raises(hccl.HCCL_E_NOT_SUPPORT, "HCCL_DATA_TYPE_FP8E4M3"):
        hccl.all_reduce(buffer, buffer, COUNT, hccl.HCCL_DATA_TYPE_FP8E4M3, total, comm)
    with _raises(hccl.HCCL_E_PARA, "'count' = -1"):
        hccl.all_reduce(buffer, buffer, -1, fp32, total, comm)
    with _raises(hccl.HCCL_E_PTR, "'comm' = 0", "null communicator"):
        hccl.all_reduce(buffer, buffer, COUNT, fp32, total, 0)
    with _raises(hccl.HCCL_E_PARA, "not a communicator"):
        hccl.get_rank_size(12345)
    with _raises(hccl.HCCL_E_PTR, "'sendBuf' = 0", "null pointer"):
        hccl.all_reduce(0, buffer, COUNT, fp32, total, comm)
    with _raises(hccl.HCCL_E_PARA, "'sendBuf'", "host memory"):
        hccl.all_reduce(host, buffer, COUNT, fp32, total, comm)
    with _raises(hccl.HCCL_E_PARA, "wild pointer"):
        hccl.broadcast(0xDEAD0000, COUNT, fp32, 0, comm)
    with _raises(hccl.HCCL_E_PARA, "'destRank' = 0", "this rank itself"):
        hccl.send(buffer, COUNT, fp32, 0, comm)
    with _raises(hccl.HCCL_E_PARA, "'recvType' = HCCL_DATA_TYPE_INT32"):
        hccl.all_to_all_v(buffer, [1], [0], fp32, buffer, [1], [0], hccl.HCCL_DATA_TYPE_INT32,
                          comm)
    with _raises(hccl.HCCL_E_PARA, "'sendCounts'", "1 entries"):
        hccl.all_to_all_v(buffer, [1, 1], [0, 0], fp32, buffer, [1], [0], fp32, comm)
    with _raises(hccl.HCCL_E_PTR, "'rdispls' = 0"):
        hccl.all_to_all_v(buffer, [1], [0], fp32, buffer, [1], 0, fp32, comm)
    with _raises(hccl.HCCL_E_PARA, "TypeError"):
        hccl.all_reduce(buffer, buffer, COUNT, fp32)  # a wrong call is a parameter error
    with _raises(hccl.HCCL_E_PARA, "'nRanks' = 0"):
        hccl.comm_init_root_info(0, hccl.get_root_info(), 0)
    with _raises(hccl.HCCL_E_PARA, "'rank' = 2"):
        hccl.comm_init_root_info(2, hccl.get_root_info(), 2)
    with _raises(hccl.HCCL_E_PARA, "'rootInfo'", "4108"):
        hccl.comm_init_root_info(1, b"not root info", 0)
    with _raises(hccl.HCCL_E_PARA, "'exec_timeout' = -1"):
        hccl.comm_init_root_info(1, hccl.get_root_info(), 0, exec_timeout=-1)
    with _raises(hccl.HCCL_E_PARA, "'ndev' = 0"):
        hccl.comm_init_all(0, [])
    with _raises(hccl.HCCL_E_PARA, "listed twice"):
        hccl.comm_init_all(2, [0, 0])
    with _raises(hccl.HCCL_E_PARA, "'devices'"):
        hccl.comm_init_all(1, [7])
    comm.destroy()
    with _raises(hccl.HCCL_E_PARA, "was destroyed"):
        hccl.barrier(comm)
    assert get_recent_err_msg().startswith("HCCL_E_PARA (1): ")
    for memory in (buffer, host, small):
        memory.free()


def test_timeouts_come_from_the_environment(monkeypatch):
    openacl.init()
    rt.set_device(0)
    monkeypatch.setenv("HCCL_EXEC_TIMEOUT", "soon")
    with _raises(hccl.HCCL_E_PARA, "'HCCL_EXEC_TIMEOUT' = 'soon'", "positive number"):
        hccl.comm_init_root_info(1, hccl.get_root_info(), 0)
    monkeypatch.setenv("HCCL_EXEC_TIMEOUT", "7.5")
    monkeypatch.setenv("HCCL_CONNECT_TIMEOUT", "0")
    with _raises(hccl.HCCL_E_PARA, "'HCCL_CONNECT_TIMEOUT' = '0'"):
        hccl.comm_init_root_info(1, hccl.get_root_info(), 0)
    monkeypatch.delenv("HCCL_CONNECT_TIMEOUT")
    with hccl.comm_init_root_info(1, hccl.get_root_info(), 0) as comm:
        assert comm.exec_timeout_s == 7.5


def test_comm_init_all_one_communicator_per_device():
    openacl.init({"device_count": 2})
    comms = hccl.comm_init_all(2, [0, 1])
    assert [(c.rank, c.size, c.device_id) for c in comms] == [(0, 2, 0), (1, 2, 1)]
    buffers, streams = [], []
    for device_id, comm in enumerate(comms):
        rt.set_device(device_id)
        buffers.append(_device(np.full(COUNT, device_id + 1, np.int16)))
        streams.append(openacl.Stream())
        hccl.all_reduce(buffers[-1], buffers[-1], COUNT, hccl.HCCL_DATA_TYPE_INT16,
                        hccl.HCCL_REDUCE_PROD, comm, streams[-1])
    with _raises(hccl.HCCL_E_PARA, "'stream'", "device 1", "device 0"):
        hccl.barrier(comms[0], streams[1])
    with _raises(hccl.HCCL_E_PARA, "'buf'", "memory of device 1"):
        hccl.broadcast(buffers[1], COUNT, hccl.HCCL_DATA_TYPE_INT16, 0, comms[0], streams[0])
    for device_id, (buffer, stream) in enumerate(zip(buffers, streams, strict=True)):
        rt.set_device(device_id)
        stream.synchronize()
        np.testing.assert_array_equal(buffer.to_numpy(np.int16), np.full(COUNT, 2))
        stream.destroy()
        buffer.free()
    for comm in comms:
        comm.destroy()


def test_rank_table_errors(tmp_path):
    openacl.init()
    rt.set_device(0)
    with _raises(hccl.HCCL_E_OPEN_FILE_FAILURE, "'clusterInfo'", "cannot read"):
        hccl.comm_init_cluster_info(str(tmp_path / "missing.json"), 0)
    bad = tmp_path / "bad.json"
    bad.write_text('{"server_list": [{"device": [{"rank_id": "1"}]}]}')
    with _raises(hccl.HCCL_E_PARA, "not a rank table"):
        hccl.comm_init_cluster_info(str(bad), 0)
    gap = tmp_path / "gap.json"
    gap.write_text(json.dumps({"server_list": [{"server_id": "127.0.0.1", "device": [
        {"device_id": "0", "rank_id": "1"}]}]}))
    with _raises(hccl.HCCL_E_PARA, "are not 0..n-1"):
        hccl.comm_init_cluster_info(str(gap), 0)


def test_comm_init_from_env_names_the_missing_variable(monkeypatch):
    openacl.init()
    rt.set_device(0)
    for variable in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(variable, raising=False)
    with _raises(hccl.HCCL_E_PARA, "RANK is not set", "openacl launch"):
        hccl.comm_init_from_env()
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")
    with _raises(hccl.HCCL_E_PARA, "'RANK' = 3"):
        hccl.comm_init_from_env()


def test_before_init_is_a_runtime_error():
    with _raises(hccl.HCCL_E_RUNTIME, "ACL_ERROR_UNINITIALIZE (100001)"):
        hccl.get_root_info()


def test_the_cuda_backend_is_refused_clearly():
    with fake_cupy.installed():
        openacl.init({"backend": "cuda"})
        rt.set_device(0)
        with _raises(hccl.HCCL_E_NOT_SUPPORT, "'cuda' backend", "nccl"):
            hccl.get_root_info()
        openacl.finalize()


def test_compat_face_codes_and_messages():
    info, ret = chccl.HcclGetRootInfo()  # before init
    assert (info, ret) == (b"", chccl.HCCL_E_RUNTIME)
    assert chccl.get_recent_err_msg().startswith("HCCL_E_RUNTIME (15): ")
    openacl.init()
    rt.set_device(0)
    info, ret = chccl.HcclGetRootInfo()
    assert ret == chccl.HCCL_SUCCESS and len(info) == chccl.HCCL_ROOT_INFO_BYTES == 4108
    assert chccl.HcclCommInitRootInfo(1, b"junk", 0) == (chccl.NULL_COMM, chccl.HCCL_E_PARA)
    assert "'rootInfo'" in chccl.get_recent_err_msg()
    comm, ret = chccl.HcclCommInitRootInfo(1, info, 0)
    assert ret == 0 and type(comm) is int and comm
    assert chccl.HcclGetRankSize(0) == (0, chccl.HCCL_E_PTR)
    assert "null communicator" in chccl.get_recent_err_msg()
    assert chccl.HcclAllReduce(0, 0, 1, 4, 0, comm, 0) == chccl.HCCL_E_PTR
    assert chccl.HcclAllReduce(1, 2) == chccl.HCCL_E_PARA  # a wrong call
    assert "TypeError" in chccl.get_recent_err_msg()
    assert chccl.HcclBarrier(comm, 0) == 0
    assert acl.rt.synchronize_stream(0) == 0
    assert chccl.HcclCommInitAll(1, [0])[1] == 0
    assert chccl.HcclGetErrorString(chccl.HCCL_E_TIMEOUT) == "HCCL_E_TIMEOUT"
    assert chccl.HcclCommDestroy(comm) == 0
    assert chccl.HcclAllReduce.__doc__.startswith("HcclAllReduce(...) -> ret")
    for name in ("HcclGetRootInfo", "HcclCommInitRootInfo", "HcclCommInitClusterInfo",
                 "HcclCommInitAll", "HcclGetRankSize", "HcclGetRankId", "HcclCommDestroy",
                 "HcclAllReduce", "HcclBroadcast", "HcclAllGather", "HcclReduceScatter",
                 "HcclReduce", "HcclSend", "HcclRecv", "HcclAlltoAllV", "HcclBarrier"):
        assert callable(getattr(chccl, name)) and name in chccl.__all__


def test_constants_have_canns_values():
    assert [t.value for t in hccl.HcclDataType] == [*range(13), 14, 15, 16, 17]
    assert hccl.HCCL_DATA_TYPE_BFP16 == 11 and hccl.HCCL_DATA_TYPE_UINT64 == 6
    assert [o.value for o in hccl.HcclReduceOp] == [0, 1, 2, 3]
    assert (hccl.HCCL_E_PARA, hccl.HCCL_E_PTR, hccl.HCCL_E_NOT_SUPPORT, hccl.HCCL_E_TIMEOUT,
            hccl.HCCL_E_REMOTE, hccl.HCCL_E_SUSPENDING) == (1, 2, 5, 9, 21, 22)
    assert hccl.HCCL_ROOT_INFO_BYTES == 4108
    assert [hccl.data_type_size(t) for t in hccl.HcclDataType] == \
        [1, 2, 4, 2, 4, 8, 8, 1, 2, 4, 8, 2, 16, 1, 1, 1, 1]
    assert hccl.hccl_result_name(99) == "HCCL_E_UNKNOWN(99)"
    assert 1 not in openacl.errors.ERROR_TABLE  # the ACL table keeps to ACL codes


def test_without_torch_the_install_line():
    code = """
import sys
sys.modules["torch"] = None
import openacl
from openacl import hccl
from openacl.compat import hccl as chccl
openacl.init()
openacl.rt.set_device(0)
try:
    hccl.get_root_info()
except hccl.HcclError as exc:
    print("raised", exc.code, exc)
info, ret = chccl.HcclGetRootInfo()
print("compat", ret, chccl.get_recent_err_msg())
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("raised 5 HCCL_E_NOT_SUPPORT (5): "), lines
    assert lines[1].startswith("compat 5 HCCL_E_NOT_SUPPORT (5): "), lines
    assert all("pip install 'openacl[dist]'" in line for line in lines)


def test_importing_openacl_and_hccl_does_not_import_torch():
    code = ("import sys, openacl, openacl.hccl, openacl.compat.hccl, openacl.cli.main; "
            "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=RUN_TIMEOUT_S)
    assert result.stdout.strip() == "False", result.stderr


# -- openacl launch ------------------------------------------------------------------------------
def test_launch_sets_the_environment_and_prefixes_output(tmp_path):
    app = tmp_path / "app.py"
    app.write_text("import os, sys\n"
                   "keys = 'RANK LOCAL_RANK WORLD_SIZE MASTER_ADDR MASTER_PORT'.split()\n"
                   "print(*(os.environ[k] for k in keys), sys.argv[1:])\n"
                   "print('to stderr', file=sys.stderr)\n")
    result = launch(3, str(app), "--flag", "x")
    assert result.returncode == 0, result.stderr
    lines = sorted(result.stdout.splitlines())
    port = lines[0].split()[6]
    assert port.isdigit()
    assert lines == [f"[rank {r}] {r} {r} 3 127.0.0.1 {port} ['--flag', 'x']" for r in range(3)]
    assert sorted(result.stderr.splitlines()) == [f"[rank {r}] to stderr" for r in range(3)]


def test_launch_returns_the_first_failure_and_stops_the_others(tmp_path):
    app = tmp_path / "app.py"
    app.write_text("import os, sys, time\n"
                   "if os.environ['RANK'] == '1':\n"
                   "    sys.exit(7)\n"
                   "time.sleep(60)\n")
    start = time.monotonic()
    result = launch(2, str(app))
    assert result.returncode == 7, result.stdout + result.stderr
    assert time.monotonic() - start < 20


def test_launch_timeout_kills_every_rank(tmp_path):
    app = tmp_path / "app.py"
    app.write_text("import time\ntime.sleep(60)\n")
    start = time.monotonic()
    result = launch(2, str(app), timeout=1)
    assert result.returncode == 124
    assert "timed out after 1 s; killing 2 running rank(s)" in result.stderr
    assert time.monotonic() - start < 20


def test_launch_runs_a_command_and_refuses_bad_counts():
    result = launch(2, sys.executable, "-c", "import os; print(os.environ['WORLD_SIZE'])")
    assert sorted(result.stdout.splitlines()) == ["[rank 0] 2", "[rank 1] 2"], result.stderr
    result = launch(0, "app.py")
    assert result.returncode == 2 and "-n 0 is invalid" in result.stderr
    result = launch(1, "/nonexistent/program")
    assert result.returncode == 2 and "cannot start" in result.stderr


def test_launch_over_two_nodes_meets_at_the_master_port(tmp_path):
    """Two launchers, as on two machines (--nnodes 2, --node-rank 0 and 1, node 0's address
    and port), start one rank each: global ranks 0 and 1 of 2 all_reduce together."""
    app = tmp_path / "app.py"
    app.write_text("import os\n"
                   "import numpy as np\n"
                   "import openacl\n"
                   "from openacl import hccl\n"
                   "openacl.init()\n"
                   "openacl.rt.set_device(0)\n"
                   "comm = hccl.comm_init_from_env(exec_timeout=20)\n"
                   "buf = openacl.DeviceBuffer(4)\n"
                   "buf.copy_from(np.array([comm.rank + 1], np.float32))\n"
                   "hccl.all_reduce(buf, buf, 1, hccl.HCCL_DATA_TYPE_FP32,\n"
                   "                hccl.HCCL_REDUCE_SUM, comm)\n"
                   "openacl.rt.synchronize_stream(0)\n"
                   "keys = 'RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK'.split()\n"
                   "print(*(os.environ[k] for k in keys), buf.to_numpy(np.float32)[0])\n"
                   "buf.free()\n"
                   "comm.destroy()\n")
    port = str(hccl.free_port())
    command = [sys.executable, "-m", "openacl.cli.main", "launch", "--nnodes", "2",
               "--master-addr", "127.0.0.1", "--master-port", port, "-n", "1",
               "--timeout", str(LAUNCH_TIMEOUT_S)]
    nodes = [subprocess.Popen([*command[:4], "--node-rank", str(node), *command[4:],
                               str(app)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for node in (1, 0)]  # the far node first: it waits
    try:
        outputs = [node.communicate(timeout=RUN_TIMEOUT_S) for node in nodes]
    finally:
        for node in nodes:
            node.kill()
    for node, (_, err) in zip(nodes, outputs, strict=True):
        assert node.returncode == 0, err
    assert [out.strip() for out, _ in outputs] == ["[rank 1] 1 0 2 1 1 3.0",
                                                  "[rank 0] 0 0 2 1 0 3.0"]


def test_launch_refuses_bad_node_flags(capsys):
    from openacl.cli.main import main

    for flags, message in [
            (["--nnodes", "2", "--node-rank", "2", "--master-port", "29500"],
             "--node-rank 2 is invalid: expected 0 .. 1"),
            (["--nnodes", "2", "--node-rank", "1"], "--master-port is required"),
            (["--nnodes", "0"], "--nnodes 0 is invalid"),
            (["--node-rank", "-1"], "--node-rank -1 is invalid"),
            (["--master-port", "70000"], "--master-port 70000 is invalid")]:
        assert main(["launch", "-n", "1", *flags, "app.py"]) == 2, flags
        assert message in capsys.readouterr().err, flags
