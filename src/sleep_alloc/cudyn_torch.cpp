// cudyn — the C entry points over the process's one SleepingAllocator: the
// results become return codes and a per-thread message.
#include "cudyn/sleep_alloc/cudyn_torch.h"

#include "cudyn/sleep_alloc/sleeping_allocator.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr const char* kAlloc = "cudyn_torch_alloc";

// Made at first use and never destroyed: PyTorch frees tensors from static
// destructors of its own, in any order, and its frees must find the allocator.
cudyn::SleepingAllocator& allocator() {
    static auto* made = new cudyn::SleepingAllocator();
    return *made;
}

struct LastError {
    int code = 0;
    std::string text;
};

LastError& last_error() {
    thread_local LastError last;
    return last;
}

int succeeded() {
    last_error().code = 0;
    last_error().text.clear();
    return 0;
}

int failed(const cudyn::Error& error) {
    last_error().code = static_cast<int>(error.code) + 1;
    last_error().text = error.describe();
    return last_error().code;
}

int refused(const char* operation, const std::string& what) {
    return failed(cudyn::Error::invalid_argument(std::string(operation) + ": " + what));
}

template <typename T>
int answer(const cudyn::Result<T>& result) {
    return result ? succeeded() : failed(result.error());
}

void fill_report(const cudyn::SleepWakeReport& from, cudyn_torch_report* to) {
    if (to == nullptr) return;
    to->allocations = from.allocations;
    to->bytes = from.bytes;
    to->offloaded_bytes = from.offloaded_bytes;
    to->cache_released = from.cache_released;
}

// `count` tags from C strings; false (and the message set) for a bad list.
bool read_tags(const char* operation, const char* const* tags, int count, std::vector<std::string>* out) {
    if (count < 0) {
        refused(operation, "tag count " + std::to_string(count) + " is negative");
        return false;
    }
    if (count > 0 && tags == nullptr) {
        refused(operation, "tags is null with a count of " + std::to_string(count));
        return false;
    }
    for (int i = 0; i < count; ++i) {
        if (tags[i] == nullptr) {
            refused(operation, "tag " + std::to_string(i) + " is null");
            return false;
        }
        out->emplace_back(tags[i]);
    }
    return true;
}

}  // namespace

extern "C" {

void* cudyn_torch_alloc(ssize_t size, int device, CUstream /*stream*/) {
    if (size <= 0) {
        refused(kAlloc, "size " + std::to_string(size) + " is not positive");
        return nullptr;
    }
    auto address = allocator().allocate(static_cast<std::size_t>(size), device);
    if (!address) {
        failed(address.error());
        return nullptr;
    }
    succeeded();
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(*address));
}

void cudyn_torch_free(void* ptr, ssize_t /*size*/, int /*device*/, CUstream /*stream*/) {
    // A free cannot report: what went wrong stays in cudyn_torch_last_error().
    answer(allocator().free(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(ptr))));
}

int cudyn_torch_set_tag(const char* tag) {
    if (tag == nullptr) return refused("cudyn_torch_set_tag", "the tag is null");
    return answer(allocator().set_tag(tag));
}

int cudyn_torch_get_tag(char* buffer, size_t capacity) {
    if (buffer == nullptr || capacity == 0) return refused("cudyn_torch_get_tag", "no buffer to write the tag to");
    const std::string tag = allocator().tag();
    const std::size_t length = tag.size() < capacity - 1 ? tag.size() : capacity - 1;
    std::memcpy(buffer, tag.data(), length);
    buffer[length] = '\0';
    return succeeded();
}

int cudyn_torch_set_peers(int device, const int* peers, int count) {
    if (count < 0) return refused("cudyn_torch_set_peers", "peer count " + std::to_string(count) + " is negative");
    if (count > 0 && peers == nullptr) return refused("cudyn_torch_set_peers", "peers is null with a positive count");
    return answer(allocator().set_peers(device, std::vector<int>(peers, peers + count)));
}

int cudyn_torch_set_cache_limit(uint64_t bytes) {
    if (bytes > static_cast<uint64_t>(static_cast<std::size_t>(-1)))
        return refused("cudyn_torch_set_cache_limit", "limit does not fit in size_t");
    return answer(allocator().set_cache_limit(static_cast<std::size_t>(bytes)));
}

int cudyn_torch_trim_cache(void) { return answer(allocator().trim_cache()); }

int cudyn_torch_sleep(const char* const* offload_tags, int count, cudyn_torch_report* report) {
    std::vector<std::string> tags;
    if (!read_tags("cudyn_torch_sleep", offload_tags, count, &tags)) return last_error().code;
    auto done = allocator().sleep(tags);
    if (done) fill_report(*done, report);
    return answer(done);
}

int cudyn_torch_wake_up(const char* const* tags, int count, cudyn_torch_report* report) {
    std::vector<std::string> names;
    if (tags != nullptr && !read_tags("cudyn_torch_wake_up", tags, count, &names)) return last_error().code;
    auto done = allocator().wake_up(names, tags == nullptr);
    if (done) fill_report(*done, report);
    return answer(done);
}

int cudyn_torch_stats(cudyn_torch_tag_stats* rows, int capacity) {
    if (capacity < 0 || (capacity > 0 && rows == nullptr)) {
        refused("cudyn_torch_stats", "no room for rows: capacity " + std::to_string(capacity) +
                                         (rows == nullptr ? " with a null array" : ""));
        return -1;
    }
    const auto stats = allocator().stats();
    for (std::size_t i = 0; i < stats.size() && i < static_cast<std::size_t>(capacity); ++i) {
        cudyn_torch_tag_stats& row = rows[i];
        row = cudyn_torch_tag_stats{};
        std::strncpy(row.tag, stats[i].tag.c_str(), sizeof(row.tag) - 1);
        row.device = stats[i].device;
        row.live_bytes = stats[i].live_bytes;
        row.live_count = stats[i].live_count;
        row.peak_bytes = stats[i].peak_bytes;
        row.awake_bytes = stats[i].awake_bytes;
        row.sleeping_bytes = stats[i].sleeping_bytes;
        row.sleeping_count = stats[i].sleeping_count;
        row.offloaded_bytes = stats[i].offloaded_bytes;
    }
    succeeded();
    return static_cast<int>(stats.size());
}

uint64_t cudyn_torch_cached_bytes(void) { return allocator().cached_bytes(); }

const char* cudyn_torch_last_error(void) { return last_error().text.c_str(); }

int cudyn_torch_last_error_code(void) { return last_error().code; }

int cudyn_torch_reset(void) {
    allocator().reset();
    return succeeded();
}

}  // extern "C"
