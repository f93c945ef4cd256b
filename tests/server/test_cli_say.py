"""`uttera say` synthesizes offline, without a server, into a WAV file."""

import subprocess
import wave

from _server_process import REPO, subprocess_env, timeout, uttera_command


def say(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        uttera_command("say", *args),
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout(300),
    )


def test_say_writes_a_wav(model_dir, tmp_path):
    out = tmp_path / "hello.wav"
    result = say("Hello from the command line.", "-o", str(out), "--model", str(model_dir), "--speed", "1.25")
    assert result.returncode == 0, result.stderr
    with wave.open(str(out)) as w:
        assert (w.getnchannels(), w.getsampwidth()) == (1, 2) and w.getframerate() > 0
        assert w.getnframes() > 0
    assert str(out) in result.stdout


def test_say_refuses_empty_text_without_writing(model_dir, tmp_path):
    out = tmp_path / "empty.wav"
    result = say("   ", "-o", str(out), "--model", str(model_dir))
    assert result.returncode == 1 and "empty" in result.stderr and not out.exists()


def test_bad_flag_value_exits_2(model_dir, tmp_path):
    result = say("Hi.", "-o", str(tmp_path / "x.wav"), "--model", str(model_dir), "--block-size", "24")
    assert result.returncode == 2 and "--block-size" in result.stderr
