// cudyn-bench — the two-device fixture the peer cases share: both primary
// contexts retained for the whole run (releasing one between cases would tear
// it down), device 0's current.
#pragma once

#include "cudyn/device/primary_context.hpp"

#include <string>

namespace cudyn::bench {

struct PeerFixture {
    PrimaryContext context0;
    PrimaryContext context1;
};

// Made on first use, with peer access from 0 to 1 disabled at that moment (a
// case that needs it enabled enables it); null, with the reason in `error`,
// where there are fewer than two devices or 0 cannot reach 1.
PeerFixture* peer_fixture(std::string& error);

}  // namespace cudyn::bench
