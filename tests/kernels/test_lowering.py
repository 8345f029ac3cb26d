"""The Pallas form of the fused kernel (mcacct.kernels.fused) lowers for an NVIDIA GPU, checked without one.

``jax.export`` for ``platforms=["cuda"]`` with Pallas interpret mode off runs the whole Pallas Triton lowering
on this host: every primitive of the kernel body must have a Triton lowering rule, and the result is a Triton
IR module embedded in the StableHLO (custom call ``__gpu$xla.gpu.triton``). The tests then parse that module
with the Triton dialect, run its verifier and check that every tensor in it has a power-of-two size (Triton's
``TensorSizeTrait``). That is the strongest check possible without a device: XLA compiles the Triton IR to PTX
(register allocation, shared memory, ``ptxas``) only when the program is compiled for a GPU, so a kernel that
passes here can still fail there or be slow; none of that has been run. On CPU the same kernel body runs in
interpret mode and must equal the XLA form of the tile function.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from mcacct.core.platform import gpu_lowering_target
from mcacct.kernels.fused import (_shift0, fused_gpu_supported, fused_ladder_losses, fused_pallas_losses,
                                  fused_tile_losses, tile_constants)
from mcacct.kernels.fused_bound import fused_remove_bound_from_key
from mcacct.kernels.participation import participation_blocks_t, participation_cap

TRITON_CALL = "__gpu$xla.gpu.triton"


def _export_for_cuda(fn, *args):
    """``jax.export`` of ``fn`` for ``"cuda"`` on this host, inside :func:`gpu_lowering_target` (JAX 0.11's Triton
    lowering needs a target card). The arguments are made by the caller, outside it: under its abstract mesh no
    eager computation may run."""
    with gpu_lowering_target():
        return export.export(fn, platforms=["cuda"],
                             disabled_checks=[export.DisabledSafetyCheck.custom_call(TRITON_CALL)])(*args)


def _export_cuda(n, b, p, c, warm, num_sigmas, samples, tile):
    fn = jax.jit(lambda key, sigmas: fused_ladder_losses(key, sigmas, n, b, p, warm, 0.1, c, samples, pallas=True,
                                                         tile=tile, interpret=False))
    return _export_for_cuda(fn, jax.random.key(0), jnp.linspace(0.5, 2.0, num_sigmas))


def _triton_modules(exported) -> list[str]:
    """The Triton IR modules in an export, parsed and verified with the Triton dialect, as text (JAX internals:
    skipped where this JAX version lays them out differently)."""
    try:
        from jax._src.interpreters import mlir
        from jax._src.lib.mlir import ir
        from jax._src.lib.triton import dialect as tt_dialect
    except ImportError as e:  # pragma: no cover - depends on the JAX version
        pytest.skip(f"cannot parse Triton IR with this JAX: {e}")
    blobs = []

    def visit(op):
        if op.name == "stablehlo.custom_call" and ir.StringAttr(op.attributes["call_target_name"]).value == TRITON_CALL:
            blobs.append(ir.StringAttr(ir.DictAttr(op.attributes["mhlo.backend_config"])["ir"]).value_bytes)
        return ir.WalkResult.ADVANCE

    with mlir.make_ir_context():
        ir.Module.parse(exported.mlir_module()).operation.walk(visit)
    ctx = mlir.JaxIrContext()
    ctx.append_dialect_registry(mlir.upstream_dialects)
    tt_dialect.register_dialect(ctx)
    ctx.load_all_available_dialects()
    texts = []
    with ctx:
        for blob in blobs:
            module = ir.Module.parse(blob)
            assert module.operation.verify()
            texts.append(str(module))
    return texts


# (n, b, p, c_col, warm, J, samples, tile): b = 8 and b = 1, 3- and 4-sigma ladders (3 is padded to 4), warm and
# cold starts, n a multiple of b and not (dummy rows), general and constant c_col, several tiles per call
LOWER = [(64, 8, 0.05, (0.6, 0.5, 0.4), True, 3, 128, 128),
         (64, 8, 0.05, (0.6, 0.5, 0.4), False, 4, 128, 64),
         (37, 8, 0.3, (1.0, 0.5, 0.25), True, 4, 64, 32),
         (64, 1, 0.05, (0.7,), True, 3, 128, 128),
         (45, 1, 0.4, (1.0,), False, 4, 64, 32),
         (70, 16, 0.05, (0.25,) * 16, True, 3, 64, 32)]


@pytest.mark.parametrize("n,b,p,c,warm,nj,samples,tile", LOWER)
def test_pallas_kernel_lowers_for_cuda(n, b, p, c, warm, nj, samples, tile):
    assert fused_gpu_supported(n, b, p, c) == (True, "")
    exp = _export_cuda(n, b, p, c, warm, nj, samples, tile)
    assert exp.platforms == ("cuda",)
    assert exp.out_avals[0].shape == (nj, 2, samples)
    assert TRITON_CALL in exp.mlir_module()                       # Pallas Triton, not Mosaic GPU
    [text] = _triton_modules(exp)                                 # one kernel, verified by Triton's dialect
    assert "f64" in text and "tt.load" in text and "scf.for" in text
    sizes = {int(np.prod([int(v) for v in dims.split("x") if v])) for dims in re.findall(r"tensor<((?:\d+x)+)", text)}
    assert sizes and all(s & (s - 1) == 0 for s in sizes), sorted(sizes)


def _tile_inputs(n, b, p, warm, samples):
    kx, kz = jax.random.split(jax.random.key(n + 17 * b))
    tau = participation_blocks_t(kx, n, b, p, warm, samples, participation_cap(n, b, 1 / (1 / p + b - 1)))
    return jax.random.key_data(kz), tau


@pytest.mark.parametrize("n,b,p,c,warm,sigmas", [(37, 8, 0.3, (0.6, 0.5, 0.4), True, (0.7, 1.0, 1.6)),
                                                 (29, 4, 0.2, (0.5,) * 4, False, (0.6, 0.8, 1.0, 1.3, 2.0))])
def test_interpreted_pallas_kernel_equals_xla_form(n, b, p, c, warm, sigmas):
    """The power-of-two kernel body (padded ladder, shifts by splits and joins, suffix sums by doubling) gives
    the XLA tile function's losses up to rounding, and certifies the same samples."""
    noise_key, tau = _tile_inputs(n, b, p, warm, 16)
    sig = jnp.asarray(sigmas)
    consts = jnp.asarray(tile_constants(n, b, c))
    want, ok_want = jax.jit(lambda *a: fused_tile_losses(*a, consts, 0, 16, n, b, p, warm, c))(noise_key, tau, sig)
    got, ok = jax.jit(lambda *a: fused_pallas_losses(*a, 16, 8, n, b, p, warm, c, interpret=True))(noise_key, tau, sig)
    assert got.shape == want.shape == (len(sigmas), 2, 16)
    assert bool(jnp.all(ok)) and bool(jnp.all(ok_want))
    scale = float(jnp.max(jnp.abs(want))) + 1.0
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("n", [1, 2, 8, 16])
def test_shift_by_splits_and_joins_is_a_shift(n):
    x = jnp.arange(n * 6, dtype=jnp.float64).reshape(n, 3, 2) + 1.0
    ref = np.concatenate([np.asarray(x), np.zeros_like(x), np.zeros_like(x)])
    shifts = range(-n - 1, n + 2)
    got = jax.jit(lambda x: [_shift0(x, d) for d in shifts])(x)
    for d, y in zip(shifts, got):
        want = np.roll(ref, -d, axis=0)[:n] if d >= 0 else np.concatenate([np.zeros((-d, 3, 2)), x])[:n]
        np.testing.assert_array_equal(np.asarray(y), want, err_msg=f"d={d}")


def test_gpu_form_refuses_what_it_cannot_lower():
    ok, why = fused_gpu_supported(64, 6, 0.05, (1.0, 0.5))
    assert not ok and "min_sep=6 is not a power of two" in why
    assert fused_gpu_supported(64, 8, 1.0, (1.0,))[0] is False        # the fused kernel's own limits
    assert fused_gpu_supported(64, 4, 0.05, (1.0,) * 5)[0] is False
    with pytest.raises(ValueError, match="not a power of two"):
        _export_cuda(64, 6, 0.05, (1.0, 0.5), True, 3, 64, 32)
    with pytest.raises(ValueError, match="tile=48 is not a power of 2"):
        _export_cuda(64, 8, 0.05, (1.0, 0.5), True, 3, 96, 48)


@pytest.mark.parametrize("block,ring_rows", [(16, 16), (32, 8)])
def test_fused_bound_lowers_for_cuda_at_the_production_shape(block, ring_rows):
    """n = 7200, b = 256, c = ones(256)/16, a 4-sigma ladder, tiles of 128 draws: the Pallas Triton lowering of the
    whole kernel, its Triton IR verified, every tensor a power of two, and the rings of ``b/s`` rows per draw (each
    read before its slot is overwritten)."""
    n, b, width, tile = 7200, 256, 1024, 128
    fn = jax.jit(lambda nk, tau, sig: fused_remove_bound_from_key(nk, tau, sig, jnp.zeros(4), n, b, 1.216e-4, True,
                                                                  (1 / 16,) * 256, width, tile, block,
                                                                  interpret=False))
    exp = _export_for_cuda(fn, jnp.zeros(2, jnp.uint32), jnp.zeros((-(-n // b), width), jnp.int32),
                           jnp.linspace(0.44, 0.56, 4))
    assert exp.out_avals[0].shape == (4, width)
    [text] = _triton_modules(exp)
    assert "f64" in text and "scf.for" in text
    shapes = set(re.findall(r"tensor<((?:\d+x)+)f64>", text))
    sizes = {int(np.prod([int(v) for v in dims.split("x") if v])) for dims in shapes}
    assert all(s & (s - 1) == 0 for s in sizes), sorted(sizes)
    assert f"{ring_rows}x4x{tile}x" in shapes and max(sizes) == ring_rows * 4 * tile     # no larger f64 tensor


def test_fused_bound_lowers_for_cuda_vmapped_over_sub_blocks():
    """As the truncated scheme runs it on an accelerator: 16 sub-blocks of 64 draws under vmap, each with its own
    noise key and participation, one program of 64 draws (two warps) per sub-block: one Triton kernel, a grid axis
    added for the sub-blocks."""
    n, b, width = 7200, 256, 64
    c = (1 / 16,) * b

    def one(nk, tau, sig):
        return fused_remove_bound_from_key(nk, tau, sig, jnp.zeros(4), n, b, 1.216e-4, True, c, width, width, 16,
                                           interpret=False, num_warps=2)

    exp = _export_for_cuda(jax.jit(jax.vmap(one, in_axes=(0, 0, None))), jnp.zeros((16, 2), jnp.uint32),
                           jnp.zeros((16, -(-n // b), width), jnp.int32), jnp.linspace(0.44, 0.56, 4))
    assert exp.out_avals[0].shape == (16, 4, width)
    assert exp.mlir_module().count(TRITON_CALL) == 1
    [text] = _triton_modules(exp)
    assert "f64" in text and "scf.for" in text
