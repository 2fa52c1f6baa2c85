"""The router's load arithmetic against pool servers whose replies it cannot time: a status may or may not already
count an allocation whose answer is still on its way, and the choice must not depend on which."""

import asyncio

import httpx

from slime.agentic.env_service.router import Router


class FakePools:
    """Two pool servers seen through httpx's transport: /status counts what each allocated; an /allocate can be
    held after the server registered it (the answer is in flight when the next allocate reads the statuses)."""

    def __init__(self):
        self.leases = {"w0": [], "w1": []}
        self.hold: asyncio.Event | None = None

    async def handle(self, request: httpx.Request) -> httpx.Response:
        worker = request.url.host.split(".")[0]
        if request.url.path == "/status":
            return httpx.Response(200, json={"ok": True, "pool": {"total_active_runs": len(self.leases[worker])}})
        if request.url.path == "/allocate":
            lease = f"run-{worker}-{len(self.leases[worker])}"
            self.leases[worker].append(lease)
            if self.hold is not None:
                await self.hold.wait()
            return httpx.Response(200, json={"ok": True, "lease_id": lease, "reused": False})
        if request.url.path == "/close":
            lease = request.read().decode()
            self.leases[worker] = [x for x in self.leases[worker] if x not in lease]
            return httpx.Response(200, json={"ok": True, "closed": True})
        return httpx.Response(404, json={"ok": False, "code": "UNKNOWN_LEASE", "error": "unknown lease"})


def make_router(pools: FakePools) -> Router:
    router = Router(["http://w0.test", "http://w1.test"])
    router.client = httpx.AsyncClient(transport=httpx.MockTransport(pools.handle))
    return router


async def allocate(router: Router, key: str) -> str:
    reply = await router.allocate({"task_key": key})
    return reply.body.decode()


def test_a_status_that_already_counts_an_allocation_in_flight_does_not_count_it_twice():
    async def scenario():
        pools = FakePools()
        router = make_router(pools)
        first = await allocate(router, "a")  # w0 (tie: lowest index)
        second = await allocate(router, "b")  # w1
        pools.leases["w1"].append("someone-else")  # w1 now holds 2 by its status; w0 1
        pools.hold = asyncio.Event()
        third = asyncio.create_task(allocate(router, "c"))  # w0: lands there and waits with its answer
        while len(pools.leases["w0"]) < 2:
            await asyncio.sleep(0)
        # w0: its status says 2 (the held answer included) and this router knows 1 + 1 in flight: 2, not 3
        loads = await router.loads()
        pools.hold.set()
        await third
        await router.aclose()
        return first, second, third.result(), loads

    first, second, third, loads = asyncio.run(scenario())
    assert '"w0:' in first and '"w1:' in second and '"w0:' in third
    assert loads == [(2, 0), (2, 1)]


def test_a_burst_that_reads_the_same_statuses_spreads_evenly():
    async def scenario():
        pools = FakePools()
        router = make_router(pools)
        replies = await asyncio.gather(*(allocate(router, f"t{i}") for i in range(8)))
        await router.aclose()
        return replies

    workers = sorted(reply.split('"lease_id":"')[1][:2] for reply in asyncio.run(scenario()))
    assert workers == ["w0"] * 4 + ["w1"] * 4


def test_a_status_taken_while_nothing_moved_corrects_a_lease_the_server_reaped():
    async def scenario():
        pools = FakePools()
        router = make_router(pools)
        for key in "abcd":
            await allocate(router, key)  # 2 on each
        pools.leases["w0"].clear()  # the idle reaper closed both of w0's leases; the client never said
        before = [router.held_count(i) for i in range(2)]
        loads = await router.loads()
        closed = await router.forward("/close", {"lease_id": "w1:run-w1-0"})
        unknown = await router.forward("/heartbeat", {"lease_id": "w1:run-w1-1"})  # the fake: 404 UNKNOWN_LEASE
        await router.forward("/heartbeat", {"lease_id": "w1:run-never-ours"})  # not held: ends nothing
        again = await router.forward("/close", {"lease_id": "w1:run-w1-0"})  # a repeated close ends nothing more
        await router.aclose()
        return before, loads, [router.held_count(i) for i in range(2)], closed.status_code, unknown.status_code, again

    before, loads, after, closed, unknown, again = asyncio.run(scenario())
    assert before == [2, 2] and loads == [(0, 0), (2, 1)]
    assert (closed, unknown) == (200, 404) and after == [0, 0]  # a close and an unknown lease both end one
    assert again.status_code == 200  # counted once: the repeated close did not take another lease off w1
