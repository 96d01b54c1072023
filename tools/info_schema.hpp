// cudyn-info — the JSON Schema of `cudyn-info --json`, printed by --schema.
//
// Built from the same lists as the report (device_capabilities.def,
// capability_trials.def, the loader's states), so the two cannot disagree.
// Fields are only ever added: cluster scripts keep reading what they read,
// and a consumer ignores fields it does not know (additional properties are
// allowed everywhere). kInfoSchemaVersion goes up when fields are added.
#pragma once

#include <string>

namespace cudyn::tools {

inline constexpr int kInfoSchemaVersion = 3;  // 2: peers; 3: identity, NVML, fabric, NVLinks, atomic capabilities

std::string info_schema();

}  // namespace cudyn::tools
