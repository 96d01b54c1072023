// The interop protocols of cudyn.Memory (DLPack both ways, the CUDA array
// interface version 3) and the two memory objects that own nothing:
// cudyn.Span (a byte range of other memory, cudyn's or a foreign owner's)
// and cudyn.ArrayView (a typed view with a shape).
#include "errors.hpp"
#include "memory_object.hpp"

#include <cudyn/loader/driver_call.hpp>
#include <cudyn/memory/memory_info.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <utility>

namespace cudyn_python {
namespace {

// --- element types -------------------------------------------------------------

struct NamedType {
    const char* name;
    ElementType element;
};

constexpr NamedType element_types[] = {
    {"bool", {{dlpack::Bool, 8, 1}, 'b', 1, "bool"}},
    {"int8", {{dlpack::Int, 8, 1}, 'i', 1, "int8"}},
    {"int16", {{dlpack::Int, 16, 1}, 'i', 2, "int16"}},
    {"int32", {{dlpack::Int, 32, 1}, 'i', 4, "int32"}},
    {"int64", {{dlpack::Int, 64, 1}, 'i', 8, "int64"}},
    {"uint8", {{dlpack::UInt, 8, 1}, 'u', 1, "uint8"}},
    {"uint16", {{dlpack::UInt, 16, 1}, 'u', 2, "uint16"}},
    {"uint32", {{dlpack::UInt, 32, 1}, 'u', 4, "uint32"}},
    {"uint64", {{dlpack::UInt, 64, 1}, 'u', 8, "uint64"}},
    {"float16", {{dlpack::Float, 16, 1}, 'f', 2, "float16"}},
    {"float32", {{dlpack::Float, 32, 1}, 'f', 4, "float32"}},
    {"float64", {{dlpack::Float, 64, 1}, 'f', 8, "float64"}},
    {"bfloat16", {{dlpack::Bfloat, 16, 1}, 0, 2, "bfloat16"}},
    {"complex64", {{dlpack::Complex, 64, 1}, 'c', 8, "complex64"}},
    {"complex128", {{dlpack::Complex, 128, 1}, 'c', 16, "complex128"}},
};

// Other spellings: Python's own types, short names, torch's.
constexpr std::pair<const char*, const char*> element_aliases[] = {
    {"float", "float64"}, {"int", "int64"},     {"complex", "complex128"}, {"half", "float16"},
    {"double", "float64"}, {"long", "int64"},   {"bool_", "bool"},          {"uint8_t", "uint8"},
    {"byte", "int8"},     {"ubyte", "uint8"},   {"short", "int16"},         {"cfloat", "complex64"},
    {"cdouble", "complex128"},
};

const ElementType* find_named(const std::string& name) {
    std::string wanted = name;
    for (const auto& alias : element_aliases)
        if (wanted == alias.first) wanted = alias.second;
    for (const NamedType& entry : element_types)
        if (wanted == entry.name) return &entry.element;
    return nullptr;
}

// "<f4", "|u1", "f4", "=i8": an array-interface type string.
const ElementType* find_typestr(const std::string& text) {
    std::string body = text;
    if (!body.empty() && (body[0] == '<' || body[0] == '|' || body[0] == '=')) body = body.substr(1);
    if (body.size() < 2) return nullptr;
    const char kind = body[0];
    std::size_t itemsize = 0;
    try {
        itemsize = std::stoul(body.substr(1));
    } catch (const std::exception&) {
        return nullptr;
    }
    for (const NamedType& entry : element_types)
        if (entry.element.kind == kind && entry.element.itemsize == itemsize) return &entry.element;
    return nullptr;
}

// A dtype from Python: a name ("float32"), a type string ("<f4"), a NumPy
// dtype or scalar type, or a torch dtype.
ElementType element_type(py::handle dtype, const char* operation) {
    std::string text;
    if (py::isinstance<py::str>(dtype)) {
        text = dtype.cast<std::string>();
    } else if (py::hasattr(dtype, "__name__")) {
        text = py::str(dtype.attr("__name__")).cast<std::string>();
    } else {
        text = py::str(dtype).cast<std::string>();
    }
    if (text.rfind("torch.", 0) == 0) text = text.substr(6);
    if (const ElementType* found = find_named(text)) return *found;
    if (const ElementType* found = find_typestr(text)) return *found;
    raise_invalid(std::string(operation) + ": unknown dtype '" + text +
                  "' (bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64, complex64, complex128)");
}

std::string typestr(const ElementType& element, const char* operation) {
    if (element.kind == 0)
        raise_invalid(std::string(operation) + ": " + element.name + " has no array-interface type string");
    return std::string(element.itemsize == 1 ? "|" : "<") + element.kind + std::to_string(element.itemsize);
}

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
    std::int64_t count = 1;
    for (std::int64_t extent : shape) count *= extent;
    return count;
}

// --- DLPack export -----------------------------------------------------------------

// What a capsule's manager_ctx points at: the exported object (kept alive), the
// memory whose export count it holds, and the shape the tensor points into.
struct ExportContext {
    py::object owner;
    Memory* counted = nullptr;
    std::vector<std::int64_t> shape;
    dlpack::ManagedTensor legacy{};
    dlpack::ManagedTensorVersioned versioned{};
};

// A consumer may delete from any thread, holding the GIL or not.
void release_export(ExportContext* context) {
    if (!Py_IsInitialized()) return;  // the interpreter is gone: nothing left to release to
    py::gil_scoped_acquire gil;
    context->counted->drop_export();
    delete context;
}

void delete_legacy(dlpack::ManagedTensor* tensor) { release_export(static_cast<ExportContext*>(tensor->manager_ctx)); }
void delete_versioned(dlpack::ManagedTensorVersioned* tensor) {
    release_export(static_cast<ExportContext*>(tensor->manager_ctx));
}

// A capsule nobody consumed still owns its tensor.
// A capsule destructor may run while an exception is being raised: it keeps
// that exception as it found it.
class PendingErrorKept {
public:
#if PY_VERSION_HEX >= 0x030C0000
    PendingErrorKept() : raised_(PyErr_GetRaisedException()) {}
    ~PendingErrorKept() { PyErr_SetRaisedException(raised_); }

private:
    PyObject* raised_;
#else
    PendingErrorKept() { PyErr_Fetch(&type_, &value_, &traceback_); }
    ~PendingErrorKept() { PyErr_Restore(type_, value_, traceback_); }

private:
    PyObject* type_ = nullptr;
    PyObject* value_ = nullptr;
    PyObject* traceback_ = nullptr;
#endif
};

template <typename Managed>
void destroy_unconsumed(PyObject* capsule, const char* name) {
    if (PyCapsule_IsValid(capsule, name) == 0) return;  // consumed: the consumer deletes it
    const PendingErrorKept kept;
    auto* tensor = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
    tensor->deleter(tensor);
}

void destroy_legacy_capsule(PyObject* capsule) { destroy_unconsumed<dlpack::ManagedTensor>(capsule, dlpack::legacy_name); }
void destroy_versioned_capsule(PyObject* capsule) {
    destroy_unconsumed<dlpack::ManagedTensorVersioned>(capsule, dlpack::versioned_name);
}

py::tuple dlpack_device(const Memory& memory) {
    const MemoryDescription described = memory.describe("__dlpack_device__");
    return py::make_tuple(described.device.device_type, described.device.device_id);
}

// __dlpack__(stream=None, *, max_version=None, dl_device=None, copy=None).
// cudyn's own operations without a stream are complete when they return and
// it keeps no pending work of its own, so no stream needs to wait: `stream`
// is checked, not acted on.
py::object export_dlpack(py::object self, py::handle stream, py::handle max_version, py::handle dl_device,
                         py::handle copy) {
    Memory& memory = self.cast<Memory&>();
    const MemoryDescription described = memory.describe("__dlpack__");
    if (!stream.is_none() && !py::isinstance<py::int_>(stream))
        throw py::type_error("__dlpack__: stream must be None or an int");
    if (!stream.is_none() && described.device.device_type != dlpack::CudaHost && stream.cast<long long>() == 0)
        throw py::buffer_error("__dlpack__: stream 0 is ambiguous for CUDA memory (use 1 or 2 for a default stream)");
    if (!copy.is_none() && copy.cast<bool>())
        throw py::buffer_error("__dlpack__: cudyn exports its memory in place and never copies (copy=True)");
    if (!dl_device.is_none()) {
        const auto wanted = dl_device.cast<std::pair<int, int>>();
        if (wanted.first != described.device.device_type || wanted.second != described.device.device_id)
            throw py::buffer_error("__dlpack__: the memory lives on device (" +
                                   std::to_string(described.device.device_type) + ", " +
                                   std::to_string(described.device.device_id) + "); cudyn does not copy it elsewhere");
    }
    bool versioned = false;
    if (!max_version.is_none()) versioned = max_version.cast<std::pair<int, int>>().first >= 1;
    if (described.read_only && !versioned)
        throw py::buffer_error("__dlpack__: read-only memory needs a versioned capsule (pass max_version)");

    memory.make_ready("__dlpack__");
    ArrayLayout layout = memory.layout(described);
    auto context = std::make_unique<ExportContext>();
    context->owner = self;
    context->counted = &memory;
    context->shape = std::move(layout.shape);
    dlpack::Tensor tensor{};
    tensor.data = reinterpret_cast<void*>(described.address);
    tensor.device = described.device;
    tensor.ndim = static_cast<std::int32_t>(context->shape.size());
    tensor.dtype = layout.element.dl;
    tensor.shape = context->shape.data();
    tensor.strides = nullptr;
    tensor.byte_offset = 0;

    PyObject* capsule = nullptr;
    if (versioned) {
        context->versioned.version = dlpack::produced_version;
        context->versioned.manager_ctx = context.get();
        context->versioned.deleter = delete_versioned;
        context->versioned.flags = described.read_only ? dlpack::flag_read_only : 0;
        context->versioned.dl_tensor = tensor;
        capsule = PyCapsule_New(&context->versioned, dlpack::versioned_name, destroy_versioned_capsule);
    } else {
        context->legacy.dl_tensor = tensor;
        context->legacy.manager_ctx = context.get();
        context->legacy.deleter = delete_legacy;
        capsule = PyCapsule_New(&context->legacy, dlpack::legacy_name, destroy_legacy_capsule);
    }
    if (capsule == nullptr) throw py::error_already_set();
    memory.add_export();
    context.release();  // the capsule (or its consumer) owns it now
    return py::reinterpret_steal<py::object>(capsule);
}

// __cuda_array_interface__ (version 3): only memory the device reaches.
py::dict cuda_array_interface(const Memory& memory) {
    const MemoryDescription described = memory.describe("__cuda_array_interface__");
    if (described.device_address == 0)
        throw py::attribute_error("__cuda_array_interface__: " + std::string(memory.kind_name()) +
                                  " is host memory the device does not reach (use DLPack)");
    const ArrayLayout layout = memory.layout(described);
    py::tuple shape(layout.shape.size());
    for (std::size_t i = 0; i < layout.shape.size(); ++i) shape[i] = py::int_(layout.shape[i]);
    const std::string type = typestr(layout.element, "__cuda_array_interface__");
    py::dict interface;
    interface["shape"] = shape;
    interface["typestr"] = type;
    interface["descr"] = py::make_tuple(py::make_tuple("", type));
    interface["descr"] = py::list(interface["descr"]);
    interface["data"] = py::make_tuple(static_cast<std::uintptr_t>(described.device_address), described.read_only);
    interface["strides"] = py::none();
    // The stream a stream-ordered buffer's work is on, for the consumer to
    // wait on; None where cudyn leaves no pending work of its own.
    const std::uintptr_t ordering = memory.ordering_stream();
    interface["stream"] = ordering != 0 ? py::object(py::int_(ordering)) : py::none();
    interface["version"] = 3;
    return interface;
}

// --- cudyn.Span ------------------------------------------------------------------

// A consumed DLPack tensor: its deleter runs when the span lets go.
struct ConsumedTensor {
    void* tensor = nullptr;
    bool versioned = false;
    ConsumedTensor() = default;
    ConsumedTensor(const ConsumedTensor&) = delete;
    ConsumedTensor& operator=(const ConsumedTensor&) = delete;
    ~ConsumedTensor() {
        if (tensor == nullptr) return;
        if (versioned) {
            auto* managed = static_cast<dlpack::ManagedTensorVersioned*>(tensor);
            if (managed->deleter != nullptr) managed->deleter(managed);
        } else {
            auto* managed = static_cast<dlpack::ManagedTensor*>(tensor);
            if (managed->deleter != nullptr) managed->deleter(managed);
        }
    }
};

class Span final : public Memory {
public:
    // Over a cudyn memory object: counts as one of its exports.
    Span(MemoryDescription described, py::object owner, Memory* counted)
        : described_(described), owner_(std::move(owner)), counted_(counted) {
        if (counted_ != nullptr) counted_->add_export();
    }
    // Over foreign memory, kept alive by `owner` and/or a consumed tensor.
    Span(MemoryDescription described, py::object owner, std::unique_ptr<ConsumedTensor> consumed)
        : described_(described), owner_(std::move(owner)), consumed_(std::move(consumed)) {}
    ~Span() override { drop(); }

    MemoryDescription describe(const char* operation) const override {
        if (dropped_) raise_invalid(std::string(operation) + ": the Span was closed");
        if (counted_ != nullptr && counted_->closed())
            raise_invalid(std::string(operation) + ": the memory under this Span was freed");
        return described_;
    }
    const char* kind_name() const noexcept override { return "Span"; }
    bool closed() const noexcept override { return dropped_; }
    void close() override {
        require_no_exports("Span.close");
        drop();
    }
    py::object owner() const { return owner_; }

private:
    void drop() noexcept {
        if (dropped_) return;
        dropped_ = true;
        if (counted_ != nullptr) counted_->drop_export();
        consumed_.reset();
        owner_ = py::none();
    }
    MemoryDescription described_;
    py::object owner_;
    Memory* counted_ = nullptr;
    std::unique_ptr<ConsumedTensor> consumed_;
    bool dropped_ = false;
};

// --- cudyn.ArrayView ---------------------------------------------------------------

class ArrayView final : public Memory {
public:
    ArrayView(py::object base, Memory* memory, ElementType element, std::vector<std::int64_t> shape)
        : base_(std::move(base)), memory_(memory), element_(element), shape_(std::move(shape)) {
        memory_->add_export();
    }
    ~ArrayView() override { drop(); }

    MemoryDescription describe(const char* operation) const override {
        if (memory_ == nullptr) raise_invalid(std::string(operation) + ": the ArrayView was closed");
        MemoryDescription described = memory_->describe(operation);
        described.nbytes = static_cast<std::size_t>(element_count(shape_)) * element_.itemsize;
        return described;
    }
    ArrayLayout layout(const MemoryDescription&) const override { return {element_, shape_}; }
    const char* kind_name() const noexcept override { return "ArrayView"; }
    bool closed() const noexcept override { return memory_ == nullptr; }
    void close() override {
        require_no_exports("ArrayView.close");
        drop();
    }
    const ElementType& element() const noexcept { return element_; }
    const std::vector<std::int64_t>& shape() const noexcept { return shape_; }
    py::object base() const { return base_; }

private:
    void drop() noexcept {
        if (memory_ == nullptr) return;
        memory_->drop_export();
        memory_ = nullptr;
        base_ = py::none();
    }
    py::object base_;
    Memory* memory_;
    ElementType element_;
    std::vector<std::int64_t> shape_;
};

std::vector<std::int64_t> view_shape(py::handle shape, std::size_t nbytes, const ElementType& element,
                                     const char* operation) {
    std::vector<std::int64_t> extents;
    if (shape.is_none()) {
        if (nbytes % element.itemsize != 0)
            raise_invalid(std::string(operation) + ": " + std::to_string(nbytes) + " bytes are not a whole number of " +
                          element.name + " elements");
        extents.push_back(static_cast<std::int64_t>(nbytes / element.itemsize));
        return extents;
    }
    if (py::isinstance<py::int_>(shape)) {
        extents.push_back(shape.cast<std::int64_t>());
    } else {
        for (py::handle extent : shape) extents.push_back(extent.cast<std::int64_t>());
    }
    for (std::int64_t extent : extents)
        if (extent < 0) raise_invalid(std::string(operation) + ": shape extents must not be negative");
    const auto needed = static_cast<std::size_t>(element_count(extents)) * element.itemsize;
    if (needed > nbytes)
        raise_invalid(std::string(operation) + ": the shape needs " + std::to_string(needed) + " bytes, the memory holds " +
                      std::to_string(nbytes));
    return extents;
}

// --- consuming: cudyn.from_dlpack, cudyn.from_cuda_array_interface ----------------

MemoryDescription foreign_description(std::uintptr_t address, std::size_t nbytes, dlpack::Device device,
                                      bool read_only) {
    MemoryDescription described;
    described.address = address;
    described.nbytes = nbytes;
    described.device = device;
    described.read_only = read_only;
    switch (device.device_type) {
        case dlpack::Cuda:
            described.device_address = address;
            break;
        case dlpack::CudaManaged:
            described.device_address = address;
            described.host_accessible = true;
            break;
        case dlpack::CudaHost: {
            described.host_accessible = true;
            // Pinned memory the device reaches has a device address: ask the driver.
            auto attributes = cudyn::pointer_attributes(reinterpret_cast<const void*>(address));
            if (attributes) described.device_address = attributes->device_address;
            break;
        }
        default:
            raise_invalid("from_dlpack: device type " + std::to_string(device.device_type) +
                          " is not CUDA memory (kDLCUDA, kDLCUDAHost or kDLCUDAManaged)");
    }
    return described;
}

std::size_t tensor_bytes(const dlpack::Tensor& tensor) {
    if (tensor.ndim < 0) raise_invalid("from_dlpack: negative ndim");
    const std::size_t element_bits = static_cast<std::size_t>(tensor.dtype.bits) * tensor.dtype.lanes;
    if (element_bits % 8 != 0) raise_invalid("from_dlpack: elements of " + std::to_string(element_bits) + " bits");
    std::int64_t count = 1;
    std::int64_t expected_stride = 1;
    for (std::int32_t axis = tensor.ndim - 1; axis >= 0; --axis) {
        const std::int64_t extent = tensor.shape[axis];
        if (extent < 0) raise_invalid("from_dlpack: negative extent");
        if (tensor.strides != nullptr && extent > 1 && tensor.strides[axis] != expected_stride)
            raise_invalid("from_dlpack: the tensor is not contiguous (row-major); make it contiguous first");
        expected_stride *= extent;
        count *= extent;
    }
    return static_cast<std::size_t>(count) * (element_bits / 8);
}

py::object span_from_capsule(py::object capsule, py::object owner) {
    auto consumed = std::make_unique<ConsumedTensor>();
    const dlpack::Tensor* tensor = nullptr;
    bool read_only = false;
    const char* used_name = nullptr;
    if (PyCapsule_IsValid(capsule.ptr(), dlpack::versioned_name) != 0) {
        auto* managed =
            static_cast<dlpack::ManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), dlpack::versioned_name));
        if (managed->version.major > 1) {
            raise_invalid("from_dlpack: DLPack " + std::to_string(managed->version.major) +
                          ".x capsule; this cudyn reads 1.x");
        }
        tensor = &managed->dl_tensor;
        read_only = (managed->flags & dlpack::flag_read_only) != 0;
        consumed->tensor = managed;
        consumed->versioned = true;
        used_name = dlpack::versioned_used_name;
    } else if (PyCapsule_IsValid(capsule.ptr(), dlpack::legacy_name) != 0) {
        auto* managed = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), dlpack::legacy_name));
        tensor = &managed->dl_tensor;
        consumed->tensor = managed;
        used_name = dlpack::legacy_used_name;
    } else {
        raise_invalid("from_dlpack: not an unconsumed DLPack capsule");
    }
    // Checked before the capsule is marked used: a refused tensor stays the capsule's.
    const std::size_t nbytes = [&] {
        try {
            return tensor_bytes(*tensor);
        } catch (...) {
            consumed->tensor = nullptr;
            throw;
        }
    }();
    const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(tensor->data) + tensor->byte_offset;
    MemoryDescription described;
    try {
        described = foreign_description(address, nbytes, tensor->device, read_only);
    } catch (...) {
        consumed->tensor = nullptr;
        throw;
    }
    PyCapsule_SetName(capsule.ptr(), used_name);
    return py::cast(std::make_unique<Span>(described, std::move(owner), std::move(consumed)));
}

// Waits for the stream a CUDA array interface names (its version-3 rule).
void wait_for_interface_stream(py::handle stream) {
    if (stream.is_none()) return;
    const auto handle = reinterpret_cast<CUstream>(stream.cast<std::uintptr_t>());
    cudyn::Result<void> result = cudyn::ok();
    {
        py::gil_scoped_release unlocked;
        result = cudyn::call_driver(&cudyn::DriverTable::cuStreamSynchronize_v2000, handle);
    }
    unwrap(std::move(result));
}

py::object from_cuda_array_interface(py::object object) {
    const py::dict interface = object.attr("__cuda_array_interface__");
    const py::tuple data = interface["data"];
    const auto address = data[0].cast<std::uintptr_t>();
    const bool read_only = data[1].cast<bool>();
    const ElementType element = element_type(interface["typestr"], "from_cuda_array_interface");
    std::vector<std::int64_t> shape;
    for (py::handle extent : interface["shape"]) shape.push_back(extent.cast<std::int64_t>());
    if (interface.contains("strides") && !interface["strides"].is_none()) {
        std::int64_t expected = static_cast<std::int64_t>(element.itemsize);
        const py::tuple strides = interface["strides"];
        for (std::size_t axis = shape.size(); axis-- > 0;) {
            if (shape[axis] > 1 && strides[axis].cast<std::int64_t>() != expected)
                raise_invalid("from_cuda_array_interface: the array is not contiguous (row-major)");
            expected *= shape[axis];
        }
    }
    if (interface.contains("stream")) wait_for_interface_stream(interface["stream"]);
    const std::size_t nbytes = static_cast<std::size_t>(element_count(shape)) * element.itemsize;
    dlpack::Device device{dlpack::Cuda, 0};
    if (address != 0) {
        const cudyn::PointerAttributes attributes = unwrap(cudyn::pointer_attributes(static_cast<CUdeviceptr>(address)));
        device.device_id = attributes.device_ordinal < 0 ? 0 : attributes.device_ordinal;
        if (attributes.is_managed) device.device_type = dlpack::CudaManaged;
        else if (attributes.memory_type == cudyn::MemoryType::Host) device.device_type = dlpack::CudaHost;
    }
    MemoryDescription described = foreign_description(address, nbytes, device, read_only);
    if (device.device_type == dlpack::CudaHost) described.device_address = address;  // the interface gave a device pointer
    return py::cast(std::make_unique<Span>(described, std::move(object), std::unique_ptr<ConsumedTensor>()));
}

py::object from_dlpack(py::object object, py::object stream) {
    if (PyCapsule_CheckExact(object.ptr()) != 0) return span_from_capsule(object, py::none());
    if (!py::hasattr(object, "__dlpack__")) {
        if (py::hasattr(object, "__cuda_array_interface__")) return from_cuda_array_interface(object);
        throw py::type_error("from_dlpack: the object has neither __dlpack__ nor __cuda_array_interface__");
    }
    const py::tuple device = object.attr("__dlpack_device__")();
    // Host kinds take no stream; CUDA memory is made ready on the one given
    // (None: the legacy default stream, which cudyn's synchronous calls follow).
    py::object consumer_stream = device[0].cast<int>() == dlpack::CudaHost ? py::none() : stream;
    py::object capsule;
    try {
        capsule = object.attr("__dlpack__")(py::arg("stream") = consumer_stream,
                                            py::arg("max_version") = py::make_tuple(1, 0));
    } catch (py::error_already_set& failure) {
        if (!failure.matches(PyExc_TypeError)) throw;
        capsule = object.attr("__dlpack__")(py::arg("stream") = consumer_stream);  // a pre-1.0 producer
    }
    return span_from_capsule(capsule, object);
}

}  // namespace

void bind_array_export(py::module_& module, py::class_<Memory>& memory_class) {
    memory_class
        .def("__dlpack__", &export_dlpack, py::arg("stream") = py::none(), py::kw_only(),
             py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
             "A DLPack capsule over this memory, no copy: versioned (DLPack 1.0) when `max_version` allows, the "
             "legacy capsule otherwise. The capsule keeps this object alive and counts as an export.")
        .def("__dlpack_device__", &dlpack_device,
             "(device type, device id): kDLCUDA (2), kDLCUDAHost (3) or kDLCUDAManaged (13).")
        .def_property_readonly("__cuda_array_interface__", &cuda_array_interface,
                               "The CUDA array interface, version 3 (memory the device reaches only).")
        .def(
            "span",
            [](py::object self, std::size_t offset, py::object nbytes) {
                Memory& memory = self.cast<Memory&>();
                MemoryDescription described = memory.describe("Memory.span");
                const std::size_t size = nbytes.is_none() ? described.nbytes - std::min(offset, described.nbytes)
                                                          : nbytes.cast<std::size_t>();
                if (offset > described.nbytes || size > described.nbytes - offset)
                    raise_invalid("Memory.span: offset " + std::to_string(offset) + " + " + std::to_string(size) +
                                  " bytes exceeds the " + std::to_string(described.nbytes) + " bytes held");
                described.address += offset;
                if (described.device_address != 0) described.device_address += offset;
                described.nbytes = size;
                return std::make_unique<Span>(described, self, &memory);
            },
            py::arg("offset") = 0, py::arg("nbytes") = py::none(),
            "A cudyn.Span of `nbytes` bytes from `offset` (default: to the end); it keeps this object alive.")
        .def(
            "view",
            [](py::object self, py::object dtype, py::object shape) {
                Memory& memory = self.cast<Memory&>();
                const MemoryDescription described = memory.describe("Memory.view");
                const ElementType element = element_type(dtype, "Memory.view");
                std::vector<std::int64_t> extents = view_shape(shape, described.nbytes, element, "Memory.view");
                return std::make_unique<ArrayView>(self, &memory, element, std::move(extents));
            },
            py::arg("dtype"), py::arg("shape") = py::none(),
            "A typed view (cudyn.ArrayView): what DLPack and the array interface report as element type and "
            "shape. `shape` defaults to all the memory as one dimension; a smaller shape views the start.");

    py::class_<Span, Memory>(module, "Span", R"doc(
Memory cudyn does not own: a byte range of a cudyn buffer (Memory.span) or of
a foreign owner's memory (cudyn.from_dlpack, cudyn.from_cuda_array_interface).
It keeps its owner alive; close() drops that reference.)doc")
        .def_property_readonly("owner", &Span::owner, "The object that owns the memory (None for a bare capsule).");

    py::class_<ArrayView, Memory>(module, "ArrayView", "A typed view of cudyn memory (Memory.view).")
        .def_property_readonly("dtype", [](const ArrayView& self) { return self.element().name; },
                               "The element type's name (\"float32\").")
        .def_property_readonly("itemsize", [](const ArrayView& self) { return self.element().itemsize; })
        .def_property_readonly(
            "shape",
            [](const ArrayView& self) {
                py::tuple shape(self.shape().size());
                for (std::size_t i = 0; i < self.shape().size(); ++i) shape[i] = py::int_(self.shape()[i]);
                return shape;
            },
            "The shape, a tuple.")
        .def_property_readonly("ndim", [](const ArrayView& self) { return self.shape().size(); })
        .def_property_readonly("base", &ArrayView::base, "The viewed memory object.");

    module.def("from_dlpack", &from_dlpack, py::arg("obj"), py::arg("stream") = py::none(),
               "Wraps another library's CUDA memory (a torch tensor, a CuPy array, a DLPack capsule) as a "
               "cudyn.Span, no copy, holding a reference to the owner. Contiguous tensors only. `stream` is the "
               "stream the producer makes the data ready on (None: the legacy default stream).");
    module.def("from_cuda_array_interface", &from_cuda_array_interface, py::arg("obj"),
               "Wraps an object exposing __cuda_array_interface__ as a cudyn.Span, waiting for the stream it "
               "names; holds a reference to the object.");
}

}  // namespace cudyn_python
