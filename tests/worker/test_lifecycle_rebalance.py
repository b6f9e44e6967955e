"""`Lifecycle.rebalance`: each call tells the calls queued until then, and only them, and counts those that left."""

from __future__ import annotations

import asyncio

from mrtr_worker.lifecycle import Lifecycle


async def test_a_rebalance_sets_the_event_queued_calls_wait_on_and_arms_a_fresh_one() -> None:
    lifecycle = Lifecycle()
    before = lifecycle.rebalanced
    assert not before.kick.is_set()
    given = lifecycle.rebalance()
    assert given is before
    assert before.kick.is_set()
    assert lifecycle.rebalanced is not before
    assert not lifecycle.rebalanced.kick.is_set()  # a call queued from now on waits for the next one
    assert lifecycle.ready  # a rebalance is not a drain
    assert await given.moved() == 0  # nobody was listening


async def test_moved_counts_the_listeners_that_left_once_every_one_has_decided() -> None:
    lifecycle = Lifecycle()
    signal = lifecycle.rebalanced
    leaving, staying, timed_out = signal.listening(), signal.listening(), signal.listening()
    for listener in (leaving, staying, timed_out):
        listener.__enter__()
    signal.left()  # a wait that ran out before the signal: not a move
    timed_out.__exit__(None, None, None)
    lifecycle.rebalance()
    counted = asyncio.ensure_future(signal.moved())
    signal.left()
    leaving.__exit__(None, None, None)
    await asyncio.sleep(0)
    assert not counted.done()  # one call is still deciding (it may have got a slot instead)
    staying.__exit__(None, None, None)
    assert await asyncio.wait_for(counted, 5) == 1
