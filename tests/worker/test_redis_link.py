"""Where a worker finds its Redis: a URL or sentinels, the WAIT policy, and clear errors for bad settings."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from pydantic import ValidationError
from redis.asyncio.client import Pipeline

from mrtr_worker.config import WorkerSettings
from mrtr_worker.redis_link import NotReplicated, RedisTarget, WaitPolicy, newest_primary, parse_sentinels
from mrtr_worker.sealing.keyring import new_ring


def _settings(tmp_path: Path, **env: str) -> WorkerSettings:
    ring = tmp_path / "ring.json"
    ring.write_text(new_ring("k").dumps())
    values: dict[str, object] = {"keyring_file": ring, "allow_anonymous": True, **env}
    return WorkerSettings(**values)  # type: ignore[arg-type]  # the environment's strings, as pydantic reads them


def test_sentinel_addresses_parse_and_bad_ones_are_named() -> None:
    assert parse_sentinels(["a:26379", " b.example:1 ", "[::1]:26380"]) == (
        ("a", 26379),
        ("b.example", 1),
        ("::1", 26380),
    )
    for bad in ("nohost", "host:", ":26379", "host:port", "host:0", "host:70000"):
        with pytest.raises(ValueError, match="is not host:port"):
            parse_sentinels([bad])


def test_a_target_is_a_url_or_sentinels_never_both_nor_neither() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        RedisTarget()
    with pytest.raises(ValueError, match="exactly one"):
        RedisTarget(url="redis://x:6379/0", sentinels=(("s", 26379),))
    assert "secret" not in RedisTarget(url="redis://:secret@x:6379/0").describe()
    assert RedisTarget(sentinels=(("s1", 1), ("s2", 2)), service="fleet").describe() == (
        "Sentinel service 'fleet' via s1:1,s2:2"
    )


def test_settings_give_a_url_target_sentinels_or_none(tmp_path: Path) -> None:
    assert _settings(tmp_path).redis_target() is None
    assert _settings(tmp_path, redis_url="").redis_target() is None  # how an overlay unsets compose's default
    assert _settings(tmp_path, redis_url="redis://r:6379/0").redis_target() == RedisTarget(url="redis://r:6379/0")
    sentinel = _settings(tmp_path, redis_sentinels="s1:26379,s2:26379,s3:26379", redis_sentinel_service="fleet")
    assert sentinel.redis_target() == RedisTarget(
        sentinels=(("s1", 26379), ("s2", 26379), ("s3", 26379)), service="fleet"
    )
    assert sentinel.redis_wait() == WaitPolicy(0, 500)
    assert not sentinel.redis_wait().on
    waiting = _settings(tmp_path, redis_sentinels="s1:26379", redis_wait_replicas="1", redis_wait_timeout_ms="250")
    assert waiting.redis_wait() == WaitPolicy(1, 250)
    assert waiting.redis_wait().on


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"redis_url": "redis://r:6379/0", "redis_sentinels": "s:26379"}, "set at most one of MRTR_WORKER_REDIS_URL"),
        ({"redis_sentinels": "s:26379,oops"}, "'oops' is not host:port"),
        ({"redis_wait_replicas": "-1"}, "redis_wait_replicas"),
        ({"redis_wait_timeout_ms": "0"}, "redis_wait_timeout_ms"),
        ({"redis_sentinel_service": ""}, "redis_sentinel_service"),
    ],
)
def test_bad_redis_settings_are_refused_clearly(tmp_path: Path, env: dict[str, str], expected: str) -> None:
    with pytest.raises(ValidationError, match=expected):
        _settings(tmp_path, **env)


def test_an_unconfirmed_write_says_what_is_known() -> None:
    assert "acknowledged by 0 of 1 replica(s) within 500 ms" in str(NotReplicated(0, WaitPolicy(1, 500)))
    assert "an unknown number of 2" in str(NotReplicated(None, WaitPolicy(2, 100)))


def _view(port: int, epoch: int, **flags: bool) -> dict[str, object]:
    """One sentinel's SENTINEL MASTERS entry for the service, as redis-py parses it."""
    return {"ip": "127.0.0.1", "port": port, "config-epoch": epoch, "is_master": True} | {
        "is_sdown": False,
        "is_odown": False,
        **flags,
    }


def test_a_sentinel_that_has_not_heard_of_the_failover_is_outvoted_by_the_newer_configuration() -> None:
    """redis-py follows the first valid answer; the stale one comes first here and names the woken old primary."""
    stale, fresh = _view(7001, epoch=3), _view(7002, epoch=4)
    assert newest_primary([stale, fresh, None]) == fresh
    assert newest_primary([fresh, stale]) == fresh


def test_a_primary_seen_down_or_not_a_primary_is_never_followed() -> None:
    down = _view(7002, epoch=9, is_sdown=True)
    failed = _view(7003, epoch=9, is_odown=True)
    not_primary = _view(7004, epoch=9, is_master=False)
    assert newest_primary([down, failed, not_primary, _view(7001, epoch=3)]) == _view(7001, epoch=3)
    assert newest_primary([down, None]) is None
    assert newest_primary([]) is None


def test_the_private_step_the_replicated_pipeline_overrides_is_still_the_one_execute_runs() -> None:
    """`ReplicatedPipeline` overrides redis-py's private `Pipeline._execute_transaction` (redis is pinned exactly):
    it must still be the step `execute` runs a transaction through, called with these arguments. What the
    override does (WAIT on the transaction's connection) is tested against real servers in `test_redis_wait.py`."""
    assert "execute = self._execute_transaction" in inspect.getsource(Pipeline.execute)
    parameters = list(inspect.signature(Pipeline._execute_transaction).parameters)
    assert parameters == ["self", "connection", "commands", "raise_on_error"]
