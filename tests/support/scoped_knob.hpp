// An environment variable set for one scope: the knobs of the fake NVML and
// the fake NCCL, which read the environment at each call. POSIX only.
#pragma once

#include <cstdlib>

namespace cudyn_test {

class ScopedKnob {
public:
    ScopedKnob(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
    ~ScopedKnob() { ::unsetenv(name_); }
    ScopedKnob(const ScopedKnob&) = delete;
    ScopedKnob& operator=(const ScopedKnob&) = delete;

private:
    const char* name_;
};

}  // namespace cudyn_test
