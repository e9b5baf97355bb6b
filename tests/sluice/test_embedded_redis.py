"""The embedded Redis of `sluice up` requires a password, kept 0600 beside its data and only in its URL."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import redis

from sluice.embedded import EmbeddedRedis, private_dir


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_it_refuses_clients_without_the_password_and_keeps_it_across_restarts(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis")
    url = server.start()
    try:
        password = (tmp_path / "redis" / "password").read_text().strip()
        assert url.startswith(f"redis://:{password}@127.0.0.1:") and len(password) >= 40
        assert _mode(tmp_path / "redis") == 0o700
        assert _mode(tmp_path / "redis" / "password") == _mode(tmp_path / "redis" / "redis.conf") == 0o600
        assert redis.Redis.from_url(url).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=server.port).ping()
        assert server.pid is not None
        assert password not in Path(f"/proc/{server.pid}/cmdline").read_text()  # every user can read that
    finally:
        server.stop()
    again = EmbeddedRedis(tmp_path / "redis")
    try:
        assert again.start().startswith(f"redis://:{password}@")
    finally:
        again.stop()


def test_private_dir_makes_and_tightens(tmp_path: Path) -> None:
    loose = tmp_path / "var"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    assert _mode(private_dir(loose)) == 0o700
    assert _mode(private_dir(tmp_path / "new" / "var")) == 0o700
