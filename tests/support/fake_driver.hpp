// Test-side access to the fake driver's introspection API (fakecuda_probe.h),
// looked up in the library cudyn already opened: the tests never link it.
#pragma once

#include "catch.hpp"

#include "cudyn/fake/fakecuda_probe.h"

#include "cudyn/device/device.hpp"
#include "cudyn/loader/loader.hpp"

#include "device/device_facts.hpp"  // forget_capabilities

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#else
#include <dlfcn.h>
#endif

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace cudyn_test {

class FakeDriver {
public:
    // The fake driver cudyn loaded; fails the test when the driver is not one.
    static const FakeDriver& loaded() {
        static const FakeDriver instance;
        return instance;
    }

    std::string variant() const { return function<PFN_fakecuda_variant>("fakecuda_variant")(); }
    int init_count() const { return function<PFN_fakecuda_init_count>("fakecuda_init_count")(); }
    long call_count(const char* name) const { return function<PFN_fakecuda_call_count>("fakecuda_call_count")(name); }
    void reset_counts() const { function<PFN_fakecuda_reset_counts>("fakecuda_reset_counts")(); }
    long live_allocations() const { return function<PFN_fakecuda_live_allocations>("fakecuda_live_allocations")(); }
    long live_streams() const { return function<PFN_fakecuda_live_streams>("fakecuda_live_streams")(); }
    long live_events() const { return function<PFN_fakecuda_live_events>("fakecuda_live_events")(); }
    long live_pools() const { return function<PFN_fakecuda_live_pools>("fakecuda_live_pools")(); }
    long live_modules() const { return function<PFN_fakecuda_live_modules>("fakecuda_live_modules")(); }
    void set_imex_channel(bool present) const {
        function<PFN_fakecuda_set_imex_channel>("fakecuda_set_imex_channel")(present ? 1 : 0);
    }
    int primary_ctx_refcount(int device) const {
        return function<PFN_fakecuda_primary_ctx_refcount>("fakecuda_primary_ctx_refcount")(device);
    }
    void set_fail(const char* spec) const { function<PFN_fakecuda_set_fail>("fakecuda_set_fail")(spec); }
    void set_deinitialized(bool on) const {
        function<PFN_fakecuda_set_deinitialized>("fakecuda_set_deinitialized")(on ? 1 : 0);
    }
    void set_attribute(int device, CUdevice_attribute attribute, int value) const {
        function<PFN_fakecuda_set_attribute>("fakecuda_set_attribute")(device, attribute, value);
        // cudyn reads each device's capabilities once (a real driver never
        // changes them): what it stored is stale now.
        cudyn::detail::forget_capabilities();
    }
    int proc_request_count() const { return function<PFN_fakecuda_proc_request_count>("fakecuda_proc_request_count")(); }
    fakecuda_proc_record proc_request(int i) const {
        fakecuda_proc_record record{};
        REQUIRE(function<PFN_fakecuda_proc_request_at>("fakecuda_proc_request_at")(i, &record) == 0);
        return record;
    }
    int advice_count() const { return function<PFN_fakecuda_advice_count>("fakecuda_advice_count")(); }
    fakecuda_record advice(int i) const {
        fakecuda_record record{};
        REQUIRE(function<PFN_fakecuda_advice_at>("fakecuda_advice_at")(i, &record) == 0);
        return record;
    }
    int prefetch_count() const { return function<PFN_fakecuda_prefetch_count>("fakecuda_prefetch_count")(); }
    fakecuda_record prefetch(int i) const {
        fakecuda_record record{};
        REQUIRE(function<PFN_fakecuda_prefetch_at>("fakecuda_prefetch_at")(i, &record) == 0);
        return record;
    }
    void clear_logs() const { function<PFN_fakecuda_clear_logs>("fakecuda_clear_logs")(); }
    // Every cu* call between record_calls(true) and record_calls(false), in order.
    void record_calls(bool on) const { function<PFN_fakecuda_record_calls>("fakecuda_record_calls")(on ? 1 : 0); }
    std::vector<std::string> recorded_calls() const {
        std::vector<std::string> names;
        const int n = function<PFN_fakecuda_recorded_call_count>("fakecuda_recorded_call_count")();
        const auto at = function<PFN_fakecuda_recorded_call>("fakecuda_recorded_call");
        for (int i = 0; i < n; ++i) {
            char name[96] = {};
            if (at(i, name, static_cast<int>(sizeof name)) == 0) names.emplace_back(name);
        }
        return names;
    }
    void set_stream_delay_us(unsigned int us) const {
        function<PFN_fakecuda_set_stream_delay_us>("fakecuda_set_stream_delay_us")(us);
    }
    long pending_work() const { return function<PFN_fakecuda_pending_work>("fakecuda_pending_work")(); }
    void set_stream_wait_timeout_ms(unsigned int ms) const {
        function<PFN_fakecuda_set_stream_wait_timeout_ms>("fakecuda_set_stream_wait_timeout_ms")(ms);
    }
    int managed_attachment(CUdeviceptr ptr) const {
        return function<PFN_fakecuda_managed_attachment>("fakecuda_managed_attachment")(ptr);
    }
    int host_may_touch(CUdeviceptr ptr) const {
        return function<PFN_fakecuda_host_may_touch>("fakecuda_host_may_touch")(ptr);
    }
    // 0 while device `device`'s primary context is healthy, else the error it failed with.
    int context_error(int device) const {
        return function<PFN_fakecuda_context_error>("fakecuda_context_error")(device);
    }

    void* symbol(const char* name) const { return lookup(name); }

private:
    FakeDriver() {
        const std::string& path = cudyn::load_report().library_path;
        REQUIRE_FALSE(path.empty());
#if defined(_WIN32)
        // The module cudyn loaded, by the path GetModuleFileNameW reported.
        const int length = ::MultiByteToWideChar(CP_UTF8, 0, path.c_str(), -1, nullptr, 0);
        std::wstring wide(static_cast<std::size_t>(length > 0 ? length : 1), L'\0');
        ::MultiByteToWideChar(CP_UTF8, 0, path.c_str(), -1, wide.data(), length);
        handle_ = reinterpret_cast<void*>(::GetModuleHandleW(wide.c_str()));
#else
        handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
#endif
        REQUIRE(handle_ != nullptr);
    }

    void* lookup(const char* name) const {
#if defined(_WIN32)
        return reinterpret_cast<void*>(::GetProcAddress(static_cast<HMODULE>(handle_), name));
#else
        return ::dlsym(handle_, name);
#endif
    }

    template <typename Function>
    Function function(const char* name) const {
        auto found = reinterpret_cast<Function>(lookup(name));
        INFO(name);
        REQUIRE(found != nullptr);
        return found;
    }

    void* handle_ = nullptr;
};

// Every piece of stream work starts `us` after it could, for a scope; then
// back to the suite's own delay (FAKECUDA_STREAM_DELAY_US, 0 when unset).
class ScopedStreamDelay {
public:
    explicit ScopedStreamDelay(unsigned int us) { FakeDriver::loaded().set_stream_delay_us(us); }
    ~ScopedStreamDelay() {
        const char* suite = std::getenv("FAKECUDA_STREAM_DELAY_US");
        FakeDriver::loaded().set_stream_delay_us(suite ? static_cast<unsigned int>(std::strtoul(suite, nullptr, 10)) : 0u);
    }
    ScopedStreamDelay(const ScopedStreamDelay&) = delete;
    ScopedStreamDelay& operator=(const ScopedStreamDelay&) = delete;
};

// An IMEX channel for a scope, in this process and in the children it starts
// (FAKECUDA_IMEX=1): fabric handles then succeed as the fake models them,
// which no real machine measured has shown (none had a channel). A test that
// needs one is modelled, and says so in its name and with the [modelled] tag.
class ScopedImexChannel {
public:
    ScopedImexChannel() {
        (void)suite_value();  // read before this scope changes it
        FakeDriver::loaded().set_imex_channel(true);
        set_environment("1");
    }
    // Back to the suite's own setting (unset: no channel, the fake's default).
    ~ScopedImexChannel() {
        const char* suite = suite_value();
        FakeDriver::loaded().set_imex_channel(suite != nullptr && std::strcmp(suite, "1") == 0);
        set_environment(suite);
    }
    ScopedImexChannel(const ScopedImexChannel&) = delete;
    ScopedImexChannel& operator=(const ScopedImexChannel&) = delete;

private:
    static const char* suite_value() {
        static const std::string* value = [] {
            const char* set = std::getenv("FAKECUDA_IMEX");
            return set ? new std::string(set) : nullptr;  // never freed: read until exit
        }();
        return value ? value->c_str() : nullptr;
    }
    static void set_environment(const char* value) {
#if defined(_WIN32)
        (void)_putenv_s("FAKECUDA_IMEX", value ? value : "");
#else
        if (value) {
            ::setenv("FAKECUDA_IMEX", value, 1);
        } else {
            ::unsetenv("FAKECUDA_IMEX");
        }
#endif
    }
};

// Clears an injected fault when a test section ends, whatever happened.
class ScopedFault {
public:
    explicit ScopedFault(const char* spec) { FakeDriver::loaded().set_fail(spec); }
    // A fault may have been stored as a capability answer (an attribute
    // refused as unknown reads as "no"): forgotten with the fault.
    ~ScopedFault() {
        FakeDriver::loaded().set_fail("");
        cudyn::detail::forget_capabilities();
    }
    ScopedFault(const ScopedFault&) = delete;
    ScopedFault& operator=(const ScopedFault&) = delete;
};

// Sets a device attribute for a scope, then back to what it was. cudyn reads
// each device's capabilities once (a real driver never changes them), so
// what it stored is forgotten on the way in and out.
class ScopedAttribute {
public:
    ScopedAttribute(int device, CUdevice_attribute attribute, int value) : device_(device), attribute_(attribute) {
        auto current = cudyn::Device::get(device)->attribute(attribute);
        REQUIRE(current.has_value());
        old_ = *current;
        FakeDriver::loaded().set_attribute(device, attribute, value);
    }
    ~ScopedAttribute() { FakeDriver::loaded().set_attribute(device_, attribute_, old_); }
    ScopedAttribute(const ScopedAttribute&) = delete;
    ScopedAttribute& operator=(const ScopedAttribute&) = delete;

private:
    int device_;
    CUdevice_attribute attribute_;
    int old_ = 0;
};

}  // namespace cudyn_test
