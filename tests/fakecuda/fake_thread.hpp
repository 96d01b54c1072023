// fake_thread.hpp — how the fake starts its own threads. On glibc before 2.34
// a program that never linked libpthread gets it only as the fake driver's
// dependency, when the loader opens the driver; libstdc++, loaded before it,
// resolved pthread_create to nothing then, so a std::thread made by the fake
// calls address 0 (seen in a Debian 11 program linking libcudyn.a). The fake
// calls pthread_create itself, which its own dependency resolved.
#pragma once

#if defined(__linux__)
#include <pthread.h>
#else
#include <thread>
#endif

namespace fake {

// Runs body(argument) on a detached thread; false when none could start.
inline bool start_detached(void (*body)(void*), void* argument) {
#if defined(__linux__)
    struct Start {
        void (*body)(void*);
        void* argument;
    };
    Start* start = new Start{body, argument};
    pthread_t thread;
    const auto run = [](void* raw) -> void* {
        Start* started = static_cast<Start*>(raw);
        const Start copy = *started;
        delete started;
        copy.body(copy.argument);
        return nullptr;
    };
    if (pthread_create(&thread, nullptr, run, start) != 0) {
        delete start;
        return false;
    }
    pthread_detach(thread);
    return true;
#else
    std::thread(body, argument).detach();
    return true;
#endif
}

}  // namespace fake
