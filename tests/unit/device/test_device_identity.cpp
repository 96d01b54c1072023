// The driver-free part of device identity: how UUIDs and PCI bus ids are
// written and read. Runs with no driver at all.
#include "support/catch.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/device/device_identity.hpp"

#include <string>

TEST_CASE("DeviceUuid: nvidia-smi's spelling, both ways", "[unit]") {
    cudyn::DeviceUuid uuid;
    for (std::size_t i = 0; i < uuid.bytes.size(); ++i) uuid.bytes[i] = static_cast<std::uint8_t>(0xf0 + i);
    CHECK(uuid.to_string() == "GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff");
    CHECK_FALSE(uuid.is_zero());
    CHECK(cudyn::DeviceUuid{}.is_zero());

    for (const char* text : {"GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff", "gpu-F0F1F2F3-F4F5-F6F7-F8F9-FAFBFCFDFEFF",
                             "f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff", "MIG-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff"}) {
        auto parsed = cudyn::DeviceUuid::parse(text);
        INFO(text);
        REQUIRE(parsed.has_value());
        CHECK(*parsed == uuid);
    }
    for (const char* text : {"", "GPU-", "GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfe", "GPU-f0f1f2f3f4f5-f6f7-f8f9-fafbfcfdfeff-",
                             "GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeffaa", "GPU-g0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff",
                             "XYZ-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff"}) {
        auto parsed = cudyn::DeviceUuid::parse(text);
        INFO(text);
        REQUIRE_FALSE(parsed.has_value());
        CHECK(parsed.error().code == cudyn::ErrorCode::InvalidArgument);
        CHECK(parsed.error().message.find(std::string("\"") + text + "\"") != std::string::npos);
    }
}

TEST_CASE("PciBusId: the driver's, nvidia-smi's and lspci's spellings", "[unit]") {
    const cudyn::PciBusId expected{0, 0x3b, 0, 0};
    CHECK(expected.to_string() == "0000:3B:00.0");
    for (const char* text : {"0000:3B:00.0", "00000000:3b:00.0", "3b:00.0", "0:3B:0.0"}) {
        auto parsed = cudyn::PciBusId::parse(text);
        INFO(text);
        REQUIRE(parsed.has_value());
        CHECK(*parsed == expected);
    }
    auto wide = cudyn::PciBusId::parse("00010002:c1:1f.7");
    REQUIRE(wide.has_value());
    CHECK(wide->domain == 0x10002);
    CHECK(wide->bus == 0xc1);
    CHECK(wide->device == 0x1f);
    CHECK(wide->function == 7);
    CHECK(wide->to_string() == "10002:C1:1F.7");

    for (const char* text : {"", "3b", "3b:00", "0000:3B:00.", "0000:3B:00.0.", "0000:3B:00.8", "0000:3B:20.0",
                             "0000:13B:00.0", "000000000:3B:00.0", "0000:3B:00.0x", "0000::3B:00.0", "zz:00.0"}) {
        auto parsed = cudyn::PciBusId::parse(text);
        INFO(text);
        REQUIRE_FALSE(parsed.has_value());
        CHECK(parsed.error().code == cudyn::ErrorCode::InvalidArgument);
        CHECK(parsed.error().message.find("is not a PCI bus id") != std::string::npos);
    }
}

TEST_CASE("Device::by_pci_bus_id refuses malformed text before the driver", "[unit]") {
    // The unit suite runs with no driver: a refusal naming the text, not
    // DriverNotFound, shows the check came first.
    auto device = cudyn::Device::by_pci_bus_id("not-a-bus-id");
    REQUIRE_FALSE(device.has_value());
    CHECK(device.error().code == cudyn::ErrorCode::InvalidArgument);
    CHECK(device.error().message.find("Device::by_pci_bus_id") != std::string::npos);
    CHECK(device.error().message.find("not-a-bus-id") != std::string::npos);
}
