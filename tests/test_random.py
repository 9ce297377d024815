"""Random draws: the numbers against a NumPy model of the generator, and draws
captured in graphs (top level, while and if bodies, tp.compile, dropout) fresh
at every replay and pass, equal to the same draws made eagerly."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

_MASK = (1 << 64) - 1


def _hash(seed: int, counter: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser of seed + counter * golden, in uint64 (wrapping)."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + counter.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _mixed(seed: int) -> int:
    """The seed as the generator keeps it: SplitMix64's finaliser of its 64 bits."""
    return int(_hash(seed & _MASK, np.array([1]))[0])  # seed + 1 * golden, then the finaliser


def _units(seed: int, counters: np.ndarray, bits: int = 24) -> np.ndarray:
    """The hash's top ``bits`` bits as a fraction in [0, 1)."""
    return (_hash(_mixed(seed), counters) >> np.uint64(64 - bits)).astype(np.float64) / float(1 << bits)


def uniform_model(seed: int, offset: int, n: int) -> np.ndarray:
    """What rand(n) gives as float32 from (seed, offset): 24 bits of the hash."""
    return _units(seed, np.arange(offset, offset + n)).astype(np.float32)


def uniform_double_model(seed: int, offset: int, n: int) -> np.ndarray:
    """What rand(n, dtype=float64) gives from (seed, offset): 53 bits of the hash."""
    return _units(seed, np.arange(offset, offset + n), bits=53)


def normal_model(seed: int, offset: int, n: int) -> np.ndarray:
    """What randn(n) gives in float64 from (seed, offset): Box-Muller on the numbers offset to offset + 2n
    (53 bits each)."""
    u = _units(seed, np.arange(offset, offset + 2 * n), bits=53)
    return np.sqrt(-2.0 * np.log(1.0 - u[0::2])) * np.cos(2.0 * np.pi * u[1::2])


def test_draws_follow_the_model_and_move_the_offset():
    tp.manual_seed(1234)
    first, second = tp.rand(3000).numpy(), tp.rand(5, 7).numpy()
    np.testing.assert_array_equal(first, uniform_model(1234, 0, 3000))  # many blocks, one offset
    np.testing.assert_array_equal(second.ravel(), uniform_model(1234, 3000, 35))
    np.testing.assert_allclose(tp.randn(10, dtype=tp.float64).numpy(), normal_model(1234, 3035, 10), rtol=1e-12)
    np.testing.assert_array_equal(tp.rand(4).numpy(), uniform_model(1234, 3055, 4))  # 2 numbers per normal


def test_float64_draws_have_53_random_bits_and_float32_draws_their_first_24():
    tp.manual_seed(321)
    wide = tp.rand(4000, dtype=tp.float64).numpy()
    np.testing.assert_array_equal(wide, uniform_double_model(321, 0, 4000))
    assert (wide * 2**24 != np.floor(wide * 2**24)).mean() > 0.99  # not float32's numbers widened
    assert wide.max() < 1.0 and wide.min() >= 0.0
    tp.manual_seed(321)
    narrow = tp.rand(4000).numpy()
    np.testing.assert_array_equal(narrow, np.floor(wide * 2**24) / 2**24)  # the same draws, cut to 24 bits
    tp.manual_seed(321)
    compiled = tp.compile(lambda x: x + tp.rand(4000, dtype=tp.float64))
    zero = tp.zeros(4000, dtype=tp.float64)
    np.testing.assert_array_equal(compiled(zero).numpy(), wide)  # the first call eagerly
    np.testing.assert_array_equal(compiled(zero).numpy(), uniform_double_model(321, 4000, 4000))  # fused
    assert any("_unit53(" in text for text in compiled.kernels())


def test_normal_draws_take_numbers_no_later_draw_takes_again():
    tp.manual_seed(0)
    tp.randn(2)
    z = tp.randn(2, dtype=tp.float64).numpy()
    u = tp.rand(4, dtype=tp.float64).numpy()
    again = np.sqrt(-2 * np.log(1 - u[0::2])) * np.cos(2 * np.pi * u[1::2])
    assert not np.isclose(z, again).any()
    np.testing.assert_allclose(z, normal_model(0, 4, 2), rtol=1e-12)


def test_seed_zero_and_neighbouring_seeds_give_unrelated_sequences():
    tp.manual_seed(0)
    zero = tp.rand(64, dtype=tp.float64).numpy()
    assert zero[0] != 0.0  # the hash of seed 0 and counter 0 was 0
    tp.manual_seed(0x9E3779B97F4A7C15)  # one golden step from seed 0: no longer its sequence shifted by one
    assert not np.isin(tp.rand(64, dtype=tp.float64).numpy(), zero).any()
    for bad in (2**64, -(2**63) - 1):
        with pytest.raises(ValueError, match="64 bits"):
            tp.manual_seed(bad)


def test_a_draw_of_many_blocks_counts_them_on_lanes_and_leaves_the_counts_at_zero():
    """Blocks count themselves done on 32 lanes; 70 blocks fill every lane, some twice."""
    from tensorplay._random import generator
    from tensorplay.kernels import random as rnd

    tp.manual_seed(99)
    state = generator.state()
    for blocks in (70, 3):
        out = tp.empty(blocks)
        offset = int(state[1].item())
        tp.cuda.launch(rnd.uniform, blocks, 1, out, state, np.float64(np.nextafter(np.float32(1), np.float32(0))))
        np.testing.assert_array_equal(out.numpy(), uniform_model(99, offset, blocks))
        after = state.numpy()
        assert after[1] == offset + blocks
        assert not after[2:].any(), f"block counts left behind: {after[2:]}"


def test_seeds_of_64_bits():
    tp.manual_seed(2**64 - 1)
    np.testing.assert_array_equal(tp.rand(8).numpy(), uniform_model(2**64 - 1, 0, 8))
    tp.manual_seed(-1)  # as PyTorch: its 64 bits
    np.testing.assert_array_equal(tp.rand(8).numpy(), uniform_model(2**64 - 1, 0, 8))


def test_rng_state_saved_and_restored():
    tp.manual_seed(3)
    tp.rand(10)
    state = tp.get_rng_state()
    a = tp.rand(6).numpy()
    tp.set_rng_state(state)
    np.testing.assert_array_equal(tp.rand(6).numpy(), a)
    with pytest.raises(TypeError, match="set_rng_state expects a tensor from tp.get_rng_state"):
        tp.set_rng_state(tp.zeros(3))


def test_a_replayed_graph_draws_what_eager_draws_would():
    tp.manual_seed(7)
    eager = [(tp.rand(300).numpy(), tp.randn(40).numpy()) for _ in range(3)]
    tp.manual_seed(7)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        u, z = tp.rand(300), tp.randn(40)
    for want_u, want_z in eager:  # fresh numbers at every replay, in eager order
        g.replay()
        np.testing.assert_array_equal(u.numpy(), want_u)
        np.testing.assert_array_equal(z.numpy(), want_z)
    np.testing.assert_array_equal(tp.rand(5).numpy(), uniform_model(7, 3 * 380, 5))  # eager draws go on after


def test_a_while_body_draws_fresh_numbers_every_pass():
    passes, n = 5, 64
    tp.manual_seed(11)
    total, count, flag = tp.zeros(n), tp.zeros(1, dtype=tp.int32), tp.ones(1, dtype=tp.bool)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag):
            total.add_(tp.rand(n))
            count.add_(1)
            tp.lt(count, passes, out=flag)
    g.replay()
    want = uniform_model(11, 0, passes * n).reshape(passes, n).astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(total.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("taken", [True, False])
def test_an_if_body_draws_only_when_taken(taken):
    tp.manual_seed(5)
    flag, out = tp.tensor([taken]), tp.zeros(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.if_(flag):
            out.copy_(tp.rand(4))
    g.replay()
    offset = 4 if taken else 0
    if taken:
        np.testing.assert_array_equal(out.numpy(), uniform_model(5, 0, 4))
    np.testing.assert_array_equal(tp.rand(3).numpy(), uniform_model(5, offset, 3))


def test_monte_carlo_pi_in_one_while_node():
    """Points in the unit square, counted inside the quarter circle, pass after
    pass until enough were drawn: the count equals the NumPy model's."""
    n, passes = 1024, 8
    tp.manual_seed(2026)
    inside, count, flag = tp.zeros(1, dtype=tp.int64), tp.zeros(1, dtype=tp.int32), tp.ones(1, dtype=tp.bool)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag, max_iters=100):
            xy = tp.rand(n, 2)
            inside.add_(((xy * xy).sum(1) <= 1.0).sum())
            count.add_(1)
            tp.lt(count, passes, out=flag)
    g.replay()
    model = uniform_model(2026, 0, 2 * n * passes).reshape(passes, n, 2)
    want = int(((model * model).sum(axis=2) <= 1.0).sum())
    assert inside.item() == want
    assert abs(4 * want / (n * passes) - np.pi) < 0.1


def test_compiled_functions_draw_fresh_numbers_every_call():
    f = tp.compile(lambda x: x + tp.rand(*x.shape))
    x = tp.zeros(50)
    tp.manual_seed(9)
    got = [f(x).numpy().copy() for _ in range(4)]  # warm-up, capture, replays
    for k, a in enumerate(got):
        np.testing.assert_array_equal(a, uniform_model(9, 50 * k, 50))


def test_dropout_graphed_masks_change_and_match_eager():
    x = tp.ones(1000)
    tp.manual_seed(21)
    eager = [F.dropout(x, 0.3).numpy() for _ in range(3)]
    tp.manual_seed(21)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = F.dropout(x, 0.3)
    masks = []
    for want in eager:
        g.replay()
        np.testing.assert_array_equal(y.numpy(), want)
        masks.append(y.numpy() > 0)
    assert not np.array_equal(masks[0], masks[1])
    kept = np.mean(masks)
    assert 0.65 < kept < 0.75
    np.testing.assert_allclose(eager[0][masks[0]], 1 / 0.7, rtol=1e-6)


def test_dropout_gradient_is_the_mask_scaled():
    tp.manual_seed(4)
    x = tp.rand(200, requires_grad=True)
    y = F.dropout(x, 0.5)
    (y * 3.0).sum().backward()
    kept = y.detach().numpy() > 0
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 3.0 * 2.0, 0.0), rtol=1e-6)


def test_dropout_checks_and_modes():
    x = tp.ones(4)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        F.dropout(x, 1.5)
    with pytest.raises(TypeError, match="dropout expects a floating point tensor"):
        F.dropout(tp.ones(3, dtype=tp.int64))
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 1.0).tolist() == [0.0] * 4
    layer = tp.nn.Dropout(0.2)
    assert repr(layer) == "Dropout(p=0.2)"
    assert layer.eval()(x) is x


def test_manual_seed_inside_a_capture_is_refused_and_nothing_is_left_open():
    g = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CaptureError, match=r"tp.manual_seed\(\) was called while a graph is being captured"):
        with tp.cuda.graph(g):
            tp.manual_seed(0)
    assert not tp.cuda.graphs.is_current_stream_capturing()
    tp.manual_seed(0)
    np.testing.assert_array_equal(tp.rand(3).numpy(), uniform_model(0, 0, 3))


def test_a_first_draw_inside_a_capture_finds_the_state_made():
    """In a fresh process, the generator's state is made before the first capture begins."""
    import subprocess
    import sys

    code = (
        "import tensorplay as tp\n"
        "g = tp.cuda.CUDAGraph()\n"
        "with tp.cuda.graph(g):\n"
        "    u = tp.rand(6)\n"
        "g.replay(); g.replay()\n"
        "print(u.tolist())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    got = np.array(eval(done.stdout.strip().splitlines()[-1]), dtype=np.float32)
    from tensorplay._random import DEFAULT_SEED

    np.testing.assert_array_equal(got, uniform_model(DEFAULT_SEED, 6, 6))  # the second replay's numbers


def test_a_graphed_module_with_dropout_draws_a_new_mask_each_call_and_its_gradient_follows():
    tp.manual_seed(8)
    model = tp.nn.Sequential(tp.nn.Linear(6, 32), tp.nn.Dropout(0.5))
    graphed = tp.cuda.make_graphed_callables(model, (tp.zeros(4, 6),))
    x = tp.ones(4, 6)
    masks = []
    for _ in range(2):
        model.zero_grad()
        y = graphed(x)
        kept = y.numpy() != 0
        (y * 1.0).sum().backward()
        masks.append(kept)
        # d sum(dropout(x W^T + b)) / d b = (kept / (1 - p)) summed over the batch
        np.testing.assert_allclose(model[0].bias.grad.numpy(), 2.0 * kept.sum(axis=0), rtol=1e-5)
    assert not np.array_equal(masks[0], masks[1])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("n, offset", [(1, 0), (7, 0), (1000, 0), (1027, 0), (1027, 1), (4099, 3)])
def test_dropout_follows_the_model_for_every_size_alignment_and_dtype(dtype, n, offset):
    """Element i keeps x[i] * scale where draw offset + i is >= p: aligned
    inputs of every size residue mod 4 (the vector loop, then the strided
    loop) and a view at an offset (the strided loop alone); the kept mask is
    the gradient's; bfloat16 goes through float32."""
    p = 0.3
    base = tp.arange(n + offset, dtype=tp.float32) * 0.25 - 3.0
    x = base.to(getattr(tp, dtype))[offset:].detach().requires_grad_(True)
    tp.manual_seed(17)
    tp.rand(5)  # the draw starts at offset 5
    y = F.dropout(x, p)
    kept = uniform_model(17, 5, n) >= np.float32(p)
    xs = x.detach().to(tp.float32).numpy().astype(np.float64)
    want = np.where(kept, xs * (1 / (1 - p)), 0.0)
    tol = {"float16": 1e-3, "bfloat16": 8e-3}.get(dtype, 1e-6)
    np.testing.assert_allclose(y.detach().to(tp.float32).numpy(), want, rtol=tol, atol=tol)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.to(tp.float32).numpy(), np.where(kept, 1 / (1 - p), 0.0), rtol=tol)
    np.testing.assert_array_equal(tp.rand(2).numpy(), uniform_model(17, 5 + n, 2))  # the offset moved past n


def test_rng_state_calls_inside_a_capture_are_refused_and_leave_the_state_as_it_was():
    """A captured set_rng_state would restore the state at every replay (each
    replay drawing the same numbers), and a captured get_rng_state would copy
    it only at replay: both are refused, as manual_seed is, with nothing changed."""
    tp.manual_seed(12)
    tp.rand(4)
    saved = tp.get_rng_state()
    tp.rand(3)  # the offset moves on to 7
    g = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CaptureError, match=r"^tp.set_rng_state\(\) was called while a graph is being captured"):
        with tp.cuda.graph(g):
            tp.set_rng_state(saved)
    assert not tp.cuda.graphs.is_current_stream_capturing()
    with pytest.raises(tp.cuda.CaptureError, match=r"^tp.get_rng_state\(\) was called while a graph is being captured"):
        with tp.cuda.graph(g):
            tp.get_rng_state()
    assert not tp.cuda.graphs.is_current_stream_capturing()
    np.testing.assert_array_equal(tp.rand(5).numpy(), uniform_model(12, 7, 5))  # the state was left as it was
    tp.set_rng_state(saved)  # and outside a capture both still work
    np.testing.assert_array_equal(tp.rand(3).numpy(), uniform_model(12, 4, 3))
    with tp.cuda.graph(g):
        u = tp.rand(2)
    g.replay()
    g.replay()
    np.testing.assert_array_equal(u.numpy(), uniform_model(12, 9, 2))  # replays draw on from the state


@pytest.mark.parametrize("draw", [tp.rand, tp.randn])
def test_draws_take_a_device_as_the_other_factories(draw):
    tp.manual_seed(3)
    a = draw(2, 3, device="cuda")
    tp.manual_seed(3)
    assert a.tolist() == draw(2, 3, device="cuda:0").tolist() and a.shape == (2, 3)
    with pytest.raises(ValueError, match="device"):
        draw(2, device="cpu")
