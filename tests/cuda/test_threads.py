"""Several host threads issuing work at once, each on its own stream."""

from __future__ import annotations

import threading

import tensorplay as tp


def test_threads_with_their_own_streams():
    errors: list = []

    def work(seed: int) -> None:
        try:
            s = tp.cuda.Stream()
            with tp.cuda.stream(s):
                for _ in range(20):
                    a = tp.full((8,), float(seed))
                    b = a * 2.0 + 1.0
                    s.synchronize()
                    assert b.tolist() == [seed * 2.0 + 1.0] * 8
        except Exception as e:  # surfaced below, with the thread's seed
            errors.append((seed, e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert tp.cuda.current_stream() is tp.cuda.default_stream()  # this thread's stream is untouched
