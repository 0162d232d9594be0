"""Questions: the one holder for what waits on a client's answer."""

from __future__ import annotations

import asyncio

from gateway.core.pending import Questions


async def test_asked_questions_are_keyed_and_wake_the_gatherer() -> None:
    questions: Questions[str, str] = Questions("t7-")
    assert not questions.changed.is_set()
    key, future = questions.ask("name?")
    assert key == "t7-1" and questions.changed.is_set()
    assert questions.ask("colour?")[0] == "t7-2"
    assert questions.unanswered() == {"t7-1": "name?", "t7-2": "colour?"}
    questions.answer({"t7-1": "Ada", "nope": "ignored"})
    assert await future == "Ada"
    assert questions.unanswered() == {"t7-2": "colour?"}
    questions.answer({"t7-1": "again"})  # a repeated key is ignored
    assert future.result() == "Ada"


async def test_resolve_all_leaves_nothing_waiting() -> None:
    questions: Questions[str, str | None] = Questions()
    futures = [questions.ask(q)[1] for q in ("a", "b")]
    futures[0].cancel()  # its asker gave up: no answer is set on it
    questions.resolve_all(lambda q: f"refused {q}")
    assert len(questions) == 0 and questions.unanswered() == {}
    assert futures[0].cancelled() and futures[1].result() == "refused b"


async def test_forget_drops_a_question_its_asker_stopped_waiting_for() -> None:
    questions: Questions[str, str] = Questions()
    key, _ = questions.ask("a")
    questions.forget(key)
    questions.forget(key)
    assert len(questions) == 0


async def test_next_change_wakes_on_a_question_on_the_other_future_or_the_time() -> None:
    questions: Questions[str, str] = Questions()
    other: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(questions.next_change(other, 10.0))
    await asyncio.sleep(0)
    questions.ask("a")
    assert await asyncio.wait_for(waiting, 10.0) is True
    waiting = asyncio.ensure_future(questions.next_change(other, 10.0))
    await asyncio.sleep(0)
    other.set_result(None)
    assert await asyncio.wait_for(waiting, 10.0) is True
    assert await questions.next_change(asyncio.get_running_loop().create_future(), 0.01) is False


async def test_take_all_hands_over_the_waiting_questions_with_their_futures() -> None:
    questions: Questions[str, str] = Questions("held")
    (key_a, a), (_, b), (_, c) = (questions.ask(q) for q in ("a", "b", "c"))
    assert key_a.startswith("held")
    c.set_result("answered already")
    taken = questions.take_all()
    assert [q for q, _ in taken] == ["a", "b"]  # the answered one is not handed over
    assert len(questions) == 0 and not questions
    taken[0][1].set_result("x")  # whoever took them answers on the askers' futures
    assert a.result() == "x" and not b.done()
    questions.forget(key_a)  # the asker's own clean-up after a take is harmless
