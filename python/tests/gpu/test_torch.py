"""torch on cudyn memory and cudyn on torch memory, no copy (the real driver)."""

import numpy
import pytest

import cudyn

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device for torch", allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def same_context():
    torch.cuda.init()
    torch.cuda.set_device(0)
    cudyn.use_device(0)  # torch and cudyn share device 0's primary context


def test_torch_kernel_writes_cudyn_reads_and_back():
    buffer = cudyn.DeviceBuffer(4 * 4096)
    tensor = torch.from_dlpack(buffer.view("float32", (64, 64)))
    assert tensor.device.type == "cuda" and tensor.shape == (64, 64)
    assert tensor.data_ptr() == buffer.device_address  # no copy
    tensor.fill_(3.0)
    torch.cuda.synchronize()
    assert (numpy.frombuffer(buffer.to_bytes(), dtype=numpy.float32) == 3.0).all()
    buffer.copy_from(numpy.full(4096, 5.0, dtype=numpy.float32))
    assert tensor.sum().item() == 5.0 * 4096
    del tensor
    buffer.close()


def test_growable_buffer_as_a_tensor_that_grows():
    growable = cudyn.GrowableBuffer(1 << 30)
    growable.grow_to(growable.chunk_size)
    count = growable.nbytes // 4
    first = torch.from_dlpack(growable.view("float32"))
    first.copy_(torch.arange(count, dtype=torch.float32, device="cuda"))
    torch.cuda.synchronize()
    address = growable.device_address
    growable.grow_to(3 * growable.chunk_size)  # grows in place: the tensor stays valid
    assert growable.device_address == address
    whole = torch.from_dlpack(growable.view("float32"))
    assert whole.shape[0] == 3 * count
    assert torch.equal(whole[:count], first)
    whole[count:].fill_(-1.0)
    torch.cuda.synchronize()
    tail = numpy.frombuffer(growable.span(count * 4, 4 * 16).to_bytes(), dtype=numpy.float32)
    assert (tail == -1.0).all()
    del first, whole
    growable.close()


def test_cudyn_wraps_a_torch_tensor():
    tensor = torch.arange(1000, dtype=torch.float32, device="cuda")
    span = cudyn.from_dlpack(tensor)
    assert span.device_address == tensor.data_ptr() and span.nbytes == 4000
    assert span.owner is tensor
    assert numpy.array_equal(numpy.frombuffer(span.to_bytes(), dtype=numpy.float32), tensor.cpu().numpy())
    target = cudyn.DeviceBuffer(4000)
    plan = cudyn.CopyPlan()
    plan.add(target, span)
    with cudyn.Stream() as stream:
        plan.execute(stream)
        stream.synchronize()
    assert target.to_bytes() == span.to_bytes()
    with pytest.raises(cudyn.InvalidArgument, match="contiguous"):
        cudyn.from_dlpack(torch.zeros((8, 8), device="cuda").t())


def test_versioned_capsule_for_torch():
    buffer = cudyn.DeviceBuffer(64)
    capsule = buffer.view("float32").__dlpack__(max_version=(1, 0))
    tensor = torch.from_dlpack(capsule)
    assert tensor.data_ptr() == buffer.device_address


def test_pinned_memory_for_torch_via_numpy():
    pinned = cudyn.PinnedBuffer(4 * 256)
    array = numpy.frombuffer(pinned, dtype=numpy.float32)
    array[:] = 7.0
    tensor = torch.from_numpy(array).to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    assert tensor.sum().item() == 7.0 * 256
