// A program that takes cudyn the way any other project would, links it and
// runs: built by both consumer projects (meson/: pkg-config or subproject;
// cmake/: find_package(cudyn CONFIG)), so both check the same behaviour.
//
//   consumer                  prints the load state; exits 0 whenever it could report
//   consumer --expect STATE   exits 1 unless the state is STATE; for `loaded` it
//                             also allocates and frees 1 MiB through cudyn::call_driver
#include <cudyn/cudyn.hpp>

#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
    const char* expected = argc == 3 && std::strcmp(argv[1], "--expect") == 0 ? argv[2] : nullptr;
    const cudyn::LoadReport& report = cudyn::load_report();
    std::printf("state %s\nlibrary %s\n", cudyn::to_string(report.state),
                report.library_path.empty() ? "-" : report.library_path.c_str());
    if (expected == nullptr) return 0;
    if (std::string(cudyn::to_string(report.state)) != expected) {
        std::fprintf(stderr, "expected state %s: %s\n", expected, report.message.c_str());
        return 1;
    }
    if (report.state != cudyn::LoadState::Loaded) return 0;

    auto device = cudyn::Device::get(0);
    if (!device) {
        std::fprintf(stderr, "%s\n", device.error().describe().c_str());
        return 1;
    }
    auto context = cudyn::PrimaryContext::activate(*device);
    if (!context) {
        std::fprintf(stderr, "%s\n", context.error().describe().c_str());
        return 1;
    }
    CUdeviceptr pointer = 0;
    auto allocated = cudyn::call_driver(&cudyn::DriverTable::cuMemAlloc_v3020, &pointer, std::size_t{1} << 20);
    if (!allocated) {
        std::fprintf(stderr, "%s\n", allocated.error().describe().c_str());
        return 1;
    }
    auto freed = cudyn::call_driver(&cudyn::DriverTable::cuMemFree_v3020, pointer);
    if (!freed) {
        std::fprintf(stderr, "%s\n", freed.error().describe().c_str());
        return 1;
    }
    std::printf("allocated and freed 1 MiB at 0x%llx\n", static_cast<unsigned long long>(pointer));
    return 0;
}
