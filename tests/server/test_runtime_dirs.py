"""The server's temporary directories (uttera_server/runtime_dirs.py), without a server."""

import os
import tempfile

from uttera_server import runtime_dirs
from uttera_server.runtime_dirs import IPC_DIR_ENV, ipc_base, ipc_dir


def test_ipc_dir_is_made_for_the_block_and_removed_with_its_variable(server_tmp, monkeypatch):
    tmp_path = server_tmp  # a short path: pytest's own tmp_path is too long for socket files under a subdirectory
    monkeypatch.delenv(IPC_DIR_ENV, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with ipc_dir():
        path = os.environ[IPC_DIR_ENV]
        assert os.path.dirname(path) == str(tmp_path) and os.path.basename(path).startswith("uttera-ipc-")
        assert ipc_base() == path
        open(os.path.join(path, "left-over"), "w").close()  # a killed process's socket file, say
    assert IPC_DIR_ENV not in os.environ and not os.path.exists(path)
    assert ipc_base() == str(tmp_path)


def test_an_operators_ipc_dir_is_used_and_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv(IPC_DIR_ENV, str(tmp_path))
    with ipc_dir():
        assert ipc_base() == str(tmp_path)
    assert os.environ[IPC_DIR_ENV] == str(tmp_path) and tmp_path.is_dir()


def test_a_temp_dir_too_long_for_socket_paths_gets_no_ipc_dir(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv(IPC_DIR_ENV, raising=False)
    deep = tmp_path / ("d" * 60)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    with ipc_dir():
        assert IPC_DIR_ENV not in os.environ and ipc_base() == str(deep)
    assert list(deep.iterdir()) == [] and "too long" in caplog.text
    assert len(str(deep)) + len("/uttera-ipc-12345678") > runtime_dirs._SOCKET_PATH_MAX - runtime_dirs._SOCKET_NAME_LEN
