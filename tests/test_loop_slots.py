"""api/loop_slots.py: the validation slots of one API process are shared, but each writer's
bodies take them one at a time, so one writer's heavy bodies never hold every slot (issue 49,
must-show 2: a victim's job post waited 4.7 s behind two attackers' bodies). Driven on one event
loop with events; each wait polls the state, yielding to the loop, never sleeping for an order."""

import asyncio

from api.loop_slots import LoopSlots


async def _until(condition, spins: int = 10_000) -> None:
    for _ in range(spins):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the state never came")


async def _scenario() -> list[str]:
    slots = LoopSlots(2)
    inside: list[str] = []
    release = {name: asyncio.Event() for name in ("a0", "a1", "a2", "b0", "c0")}
    entered: list[str] = []

    async def request(writer: str, name: str) -> None:
        async with slots.turn(writer):
            inside.append(name)
            entered.append(name)
            await release[name].wait()
            inside.remove(name)

    tasks = [asyncio.create_task(request("attacker", f"a{i}")) for i in range(3)]
    await _until(lambda: inside == ["a0"])  # its others wait for its own turn, not for a slot
    tasks.append(asyncio.create_task(request("victim", "b0")))
    await _until(lambda: sorted(inside) == ["a0", "b0"])  # the victim got the other slot at once
    tasks.append(asyncio.create_task(request("third", "c0")))
    for _ in range(100):
        await asyncio.sleep(0)
    assert sorted(inside) == ["a0", "b0"]  # two slots: the third waits for one
    release["b0"].set()
    await _until(lambda: sorted(inside) == ["a0", "c0"])  # the freed slot went to the third writer
    for name in ("a0", "a1", "a2", "c0"):
        release[name].set()
    await asyncio.gather(*tasks)
    assert inside == [] and not slots._writers[asyncio.get_running_loop()]  # nobody left waiting
    return entered


def test_a_writers_bodies_take_the_slots_one_at_a_time():
    entered = asyncio.run(_scenario())
    assert entered[:3] == ["a0", "b0", "c0"]
    assert entered[3:] == ["a1", "a2"]  # the attacker's own bodies in the order it sent them
