// cudyn._cudyn: the extension module behind the cudyn package. Importing it
// loads no driver: the driver opens at the first call that needs it.
#include "bindings.hpp"
#include "errors.hpp"

PYBIND11_MODULE(_cudyn, module) {
    module.doc() = "cudyn's native bindings; use the cudyn package.";
    cudyn_python::register_error_translator();
    cudyn_python::bind_driver(module);
    cudyn_python::bind_device(module);
    cudyn_python::bind_memory_base(module);
    cudyn_python::bind_buffers(module);
    cudyn_python::bind_vmm_pool(module);
    cudyn_python::bind_sharing(module);
    cudyn_python::bind_state(module);
    cudyn_python::bind_bench_support(module);
}
